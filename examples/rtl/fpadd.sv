// Lane arithmetic of the aggregator: IEEE 754 binary32 addition (round to
// nearest, ties to even, subnormals kept), binary16 <-> binary32
// conversions, and the int32 lane. Combinational functions: a real
// implementation pipelines them (three or four stages at 250 MHz); the
// simulation evaluates each in one cycle.
package fpadd;

  // f32_add returns a + b rounded to nearest even. inf + -inf gives the
  // x86 default NaN 0xFFC00000, as the hosts' CPUs compute it; a NaN
  // operand gives the quiet NaN 0x7FC00000 (a NaN's sign and payload are
  // not propagated: the hosts' gradients are finite, see docs/dut-rtl.md).
  function automatic logic [31:0] f32_add(input logic [31:0] a, input logic [31:0] b);
    logic        sa, sb, sr;
    logic [7:0]  ea, eb;
    logic [9:0]  e;       // result exponent, biased, may grow by one
    logic [26:0] ma, mb;  // 1.23 significand, then guard, round, sticky
    logic [27:0] m;
    logic [23:0] sig;
    logic [31:0] t;
    int          d, lz;
    logic        sticky, up;
    if (a[30:0] > 31'h7F800000 || b[30:0] > 31'h7F800000) return 32'h7FC00000;
    if (a[30:23] == 8'hFF && b[30:23] == 8'hFF && a[31] != b[31]) return 32'hFFC00000;
    if (a[30:23] == 8'hFF) return a;
    if (b[30:23] == 8'hFF) return b;
    // |a| >= |b| from here on.
    if (b[30:0] > a[30:0]) begin t = a; a = b; b = t; end
    sa = a[31]; sb = b[31];
    ea = (a[30:23] == 0) ? 8'd1 : a[30:23];
    eb = (b[30:23] == 0) ? 8'd1 : b[30:23];
    ma = {(a[30:23] != 0), a[22:0], 3'b000};
    mb = {(b[30:23] != 0), b[22:0], 3'b000};
    d = int'(ea) - int'(eb);
    if (d >= 27) begin
      mb = (mb != 0) ? 27'd1 : 27'd0;
    end else if (d > 0) begin
      sticky = 1'b0;
      for (int i = 0; i < 27; i++) if (i < d && mb[i]) sticky = 1'b1;
      mb = (mb >> d) | {26'd0, sticky};
    end
    e = {2'b00, ea};
    if (sa == sb) begin
      m = {1'b0, ma} + {1'b0, mb};
      sr = sa;
      if (m[27]) begin
        m = {1'b0, m[27:2], m[1] | m[0]};
        e = e + 1;
      end
    end else begin
      m = {1'b0, ma} - {1'b0, mb};
      if (m == 0) return 32'h00000000; // x + (-x) is +0 when rounding to nearest
      sr = sa;
      // Normalize left until bit 26 is set, but not below exponent 1
      // (then the result is subnormal).
      lz = 0;
      for (int i = 26; i >= 0; i--) if (m[i]) begin lz = 26 - i; break; end
      if (int'(e) - 1 < lz) lz = int'(e) - 1;
      m = m << lz;
      e = e - 10'(lz);
    end
    // Round to nearest, ties to even, on the guard, round and sticky bits.
    up = m[2] && (m[1] || m[0] || m[3]);
    sig = m[26:3];
    if (up) begin
      if (sig == 24'hFFFFFF) begin sig = 24'h800000; e = e + 1; end
      else sig = sig + 1;
    end
    if (e >= 255) return {sr, 8'hFF, 23'd0};
    if (!sig[23]) return {sr, 8'd0, sig[22:0]}; // subnormal (e is 1)
    return {sr, e[7:0], sig[22:0]};
  endfunction

  // f16_to_f32 widens a binary16 value exactly.
  function automatic logic [31:0] f16_to_f32(input logic [15:0] h);
    logic [9:0] f;
    int p;
    f = h[9:0];
    if (h[14:10] == 5'h1F) return {h[15], 8'hFF, f, 13'd0};
    if (h[14:10] != 0) return {h[15], 8'(int'(h[14:10]) - 15 + 127), f, 13'd0};
    if (f == 0) return {h[15], 31'd0};
    p = 0;
    for (int i = 0; i < 10; i++) if (f[i]) p = i; // leading one: value f * 2^-24
    return {h[15], 8'(p - 24 + 127), 23'((32'(f) << (23 - p)) & 32'h7FFFFF)};
  endfunction

  // f32_to_f16 rounds to nearest, ties to even; too large gives infinity,
  // NaN the quiet NaN 0x7E00 (the rule inaemu's hosts apply).
  function automatic logic [15:0] f32_to_f16(input logic [31:0] x);
    logic [15:0] s;
    logic [31:0] mag, v, h, rest, mm, q, rm, half;
    int sh;
    s = {x[31], 15'd0};
    mag = {1'b0, x[30:0]};
    if (mag > 32'h7F800000) return s | 16'h7E00;
    if (mag >= 32'h477FF000) return s | 16'h7C00;
    if (mag >= 32'h38800000) begin
      v = mag - 32'((127 - 15) << 23);
      h = v >> 13;
      rest = v & 32'h1FFF;
      if (rest > 32'h1000 || (rest == 32'h1000 && h[0])) h = h + 1;
      return s | h[15:0];
    end
    // Subnormal binary16: round value * 2^24 to an integer, to even.
    if (mag[30:23] == 0) return s;
    mm = {8'd0, 1'b1, mag[22:0]};
    sh = 126 - int'(mag[30:23]);
    if (sh > 25) return s;
    q = mm >> sh;
    rm = mm & ((32'd1 << sh) - 1);
    half = 32'd1 << (sh - 1);
    if (rm > half || (rm == half && q[0])) q = q + 1;
    return s | q[15:0];
  endfunction

  function automatic logic [15:0] f16_add(input logic [15:0] a, input logic [15:0] b);
    return f32_to_f16(f32_add(f16_to_f32(a), f16_to_f32(b)));
  endfunction

endpackage
