// ina_agg: an aggregating switch datapath for NetReduce over RoCE, in the
// spirit of the AllReduce-Switch (TCSI '21): a RoCE parser, a PSN-addressed
// result buffer kept as a ring of 2N message rows, adder lanes, ICRC
// recomputation, and re-sends answered from the buffer. See
// docs/dut-rtl.md for the interface contract and what is modelled.
//
// Every port has a streaming input (s_*) and output (m_*) in the style of
// AXI4-Stream: 64-bit tdata, first byte of the frame in tdata[7:0],
// tkeep marks the valid bytes (contiguous from byte 0; all ones but on
// the last beat), tlast on a frame's last beat, a beat moves when tvalid
// and tready are both high at a rising clock edge.
//
// The datapath is store-and-forward and handles one frame at a time: it
// takes a frame from the next port (round robin), parses it, checks its
// ICRC (8 bytes a cycle), places a gradient packet in its slot, and when
// every rank's packet of a slot is in, sums them lane by lane in rank
// order and sends each rank's frame back out with the sum in place of its
// data and a fresh ICRC. Everything else is forwarded as an L2 switch
// would (rank r's host MAC behind port r, broadcast and unknown
// destinations flooded).
module ina_agg import fpadd::*; #(
  parameter int NPORT   = 8,     // ports (ranks) the design has
  parameter int NSLOT   = 1024,  // packet slots: 2 * window * msg-len must fit
  parameter int FSTRIDE = 4352,  // bytes per stored frame (MTU 4096 + headers)
  parameter int RXMAX   = 9216   // largest frame taken in (TAP MTU 9000)
)(
  input  logic        clk,
  input  logic        rst,
  // Configuration registers (a control plane writes them before traffic).
  input  logic        cfg_agg,      // 1: aggregate (NetReduce); 0: L2 forwarding only
  input  logic [7:0]  cfg_workers,  // ranks H, 2..NPORT; rank r on port r
  input  logic [7:0]  cfg_window,   // NetReduce window N (messages in flight per rank)
  input  logic [7:0]  cfg_msglen,   // packets per message L
  input  logic [12:0] cfg_mtu,      // path MTU (largest payload)
  input  logic [1:0]  cfg_dtype,    // 0 f32, 1 i32, 2 f16
  input  logic [1:0]  cfg_enc,      // 0 RoCEv2 over IPv4, 1 RoCEv1 (EtherType 0x8915, GRH), 2 RoCEv2 over IPv6
  input  logic [2:0]  cfg_bug,      // 0 none; see BUG_* below
  input  logic [63:0] s_tdata  [NPORT],
  input  logic [7:0]  s_tkeep  [NPORT],
  input  logic        s_tlast  [NPORT],
  input  logic        s_tvalid [NPORT],
  output logic        s_tready [NPORT],
  output logic [63:0] m_tdata  [NPORT],
  output logic [7:0]  m_tkeep  [NPORT],
  output logic        m_tlast  [NPORT],
  output logic        m_tvalid [NPORT],
  input  logic        m_tready [NPORT],
  output logic        busy,          // a frame is being taken, processed or sent
  // Counters.
  output logic [63:0] n_frames_in, n_bytes_in, n_frames_out, n_busy_cycles,
  output logic [63:0] n_aggregated, n_results, n_resends, n_icrc_drops, n_other_drops, n_forwards
);

  // Switchable hardware bugs (cfg_bug).
  localparam logic [2:0] BUG_PSN_OFF_BY_ONE = 3'd1; // a middle packet's slot offset is PSN - start + 1
  localparam logic [2:0] BUG_NO_ICRC_CHECK  = 3'd2; // ingress ICRC never checked
  localparam logic [2:0] BUG_LANE_OVERFLOW  = 3'd3; // int32 lanes carry 21 bits; float sums truncated to 16 mantissa bits
  localparam logic [2:0] BUG_EARLY_WRAP     = 3'd4; // the ring of rows wraps at 2N-1 rows, the window admits 2N messages

  localparam int SUMSTRIDE = 4096;
  localparam logic [1:0] ENC_V4 = 2'd0, ENC_V1 = 2'd1, ENC_V6 = 2'd2;

  // RoCE constants.
  localparam logic [7:0] OP_FIRST = 8'h06, OP_LAST_IMM = 8'h09, OP_ONLY = 8'h0A, OP_ONLY_IMM = 8'h0B;

  typedef enum logic [4:0] {
    S_CLR, S_IDLE, S_RX, S_PARSE, S_ICRC, S_LOC, S_REL, S_PLACE, S_TAKE, S_SUM,
    S_BUILD, S_TX, S_FWD
  } state_t;
  state_t state;

  // Memories.
  logic [7:0] rxbuf [RXMAX];
  logic [7:0] txbuf [FSTRIDE];
  logic [7:0] fmem  [NSLOT*NPORT*FSTRIDE];   // each rank's frame of each slot
  logic [7:0] smem  [NSLOT*SUMSTRIDE];       // each slot's sum
  // Slot metadata.
  logic [NPORT-1:0] sl_have [NSLOT];
  logic             sl_done [NSLOT];
  logic [12:0]      sl_n    [NSLOT];         // data bytes of the slot's packets
  logic [13:0]      fr_len  [NSLOT*NPORT];   // per (slot, rank): frame length
  logic [13:0]      fr_doff [NSLOT*NPORT];   // where its data starts
  logic [13:0]      fr_udp  [NSLOT*NPORT];   // its UDP header (RoCEv2)
  logic [13:0]      fr_icrc [NSLOT*NPORT];   // its ICRC
  // Connections: rank r's WRITEs to rank r+1, entering on port r.
  logic [23:0] c_qp    [NPORT];
  logic        c_hqp   [NPORT];
  logic        c_anch  [NPORT];
  logic [31:0] c_amsg  [NPORT];   // the message that starts at c_apsn
  logic [23:0] c_apsn  [NPORT];
  logic [31:0] c_newest[NPORT];   // newest message whose first packet came (signed; -1 none)
  logic [7:0]  c_newk  [NPORT];   // its packet count
  logic [31:0] released;          // messages below are done for good
  logic [7:0]  relrow;            // released mod 2N: the ring's oldest row

  // The frame being handled.
  int          rxport, rxlen, ptr;
  logic        rxover;
  int          udp, bth, pay, paylen, icrc, doff, dlen, rank, slot, sfb;
  logic [23:0] psn;
  logic [31:0] crc, msg;
  logic        first, middle;
  int          rel_from, rel_to, rel_i, rel_j;
  // Output.
  logic        tx_from_rx;        // stream rxbuf (forwarding), else txbuf
  int          txlen, txport, emit_k, tx_udp, tx_icrc, tx_doff;
  logic [NPORT-1:0] fwd_mask;
  logic        emitting;          // building results for every rank of slot
  int          rr;

  // ---- helpers -------------------------------------------------------------
  function automatic logic [15:0] rx16(input int o); return {rxbuf[o], rxbuf[o+1]}; endfunction

  function automatic logic [31:0] crc8(input logic [31:0] c, input logic [7:0] b);
    c = c ^ {24'd0, b};
    for (int i = 0; i < 8; i++) c = c[0] ? ((c >> 1) ^ 32'hEDB88320) : (c >> 1);
    return c;
  endfunction

  function automatic logic [31:0] crc_ff8();
    logic [31:0] c = 32'hFFFFFFFF;
    for (int i = 0; i < 8; i++) c = crc8(c, 8'hFF);
    return c;
  endfunction
  localparam logic [31:0] CRC_LRH = crc_ff8(); // CRC state after the absent LRH's eight 0xFF bytes

  // icrc_mask gives byte b at frame offset i as the ICRC covers it:
  // variant fields set to ones (IPv4 TOS, TTL, checksum; GRH traffic
  // class, flow label, hop limit; UDP checksum; BTH byte 4).
  function automatic logic [7:0] icrc_mask(input int i, input logic [7:0] b, input int u, input int t);
    int h = i - 14;
    if (i == t + 4) return 8'hFF;
    if (cfg_enc != ENC_V1 && (i == u + 6 || i == u + 7)) return 8'hFF;
    if (cfg_enc == ENC_V4) begin
      if (h == 1 || h == 8 || h == 10 || h == 11) return 8'hFF;
    end else begin
      if (h == 0) return b | 8'h0F;
      if (h == 1 || h == 2 || h == 3 || h == 7) return 8'hFF;
    end
    return b;
  endfunction

  function automatic logic [47:0] host_mac(input int r);
    return {8'h02, 8'h1A, 8'hE0, 8'h00, 8'((r + 1) >> 8), 8'(r + 1)};
  endfunction

  // mac_port is the port of a host MAC, or -1.
  function automatic int mac_port(input logic [47:0] mac);
    for (int r = 0; r < NPORT; r++) if (r < int'(cfg_workers) && mac == host_mac(r)) return r;
    return -1;
  endfunction

  // is_host_addr: the 4 (IPv4) or 16 (GID) address bytes at o are rank r's.
  function automatic logic is_host_addr(input int o, input int r);
    logic [7:0] lo = 8'(r + 1);
    if (cfg_enc == ENC_V6) return rx16(o) == 16'hFD00 && rx16(o+2) == 0 && rx16(o+4) == 0 && rx16(o+6) == 0 &&
           rx16(o+8) == 0 && rx16(o+10) == 0 && rx16(o+12) == 0 && rxbuf[o+14] == 8'((r + 1) >> 8) && rxbuf[o+15] == lo;
    if (cfg_enc == ENC_V4) return rxbuf[o] == 8'd10 && rxbuf[o+1] == 0 && rxbuf[o+2] == 8'((r + 1) >> 8) && rxbuf[o+3] == lo;
    // fe80::(MAC with the U/L bit flipped, ff:fe in the middle)
    return rx16(o) == 16'hFE80 && rx16(o+2) == 0 && rx16(o+4) == 0 && rx16(o+6) == 0 &&
           rxbuf[o+8] == 8'h00 && rxbuf[o+9] == 8'h1A && rxbuf[o+10] == 8'hE0 && rxbuf[o+11] == 8'hFF &&
           rxbuf[o+12] == 8'hFE && rxbuf[o+13] == 8'h00 && rxbuf[o+14] == 8'((r + 1) >> 8) && rxbuf[o+15] == lo;
  endfunction

  // One lane-group of 8 bytes: dst + src by element type.
  function automatic logic [63:0] add64(input logic [63:0] a, input logic [63:0] b);
    logic [63:0] r;
    for (int l = 0; l < 2; l++) begin
      logic [31:0] x = a[l*32 +: 32], y = b[l*32 +: 32], z;
      if (cfg_dtype == 2'd1) begin
        z = x + y;
        if (cfg_bug == BUG_LANE_OVERFLOW) z = {{11{z[20]}}, z[20:0]};
        r[l*32 +: 32] = z;
      end else if (cfg_dtype == 2'd0) begin
        z = f32_add(x, y);
        if (cfg_bug == BUG_LANE_OVERFLOW) z[6:0] = 7'd0;
        r[l*32 +: 32] = z;
      end else begin
        r[l*32 +: 16] = f16_add(x[15:0], y[15:0]);
        r[l*32+16 +: 16] = f16_add(x[31:16], y[31:16]);
        if (cfg_bug == BUG_LANE_OVERFLOW) begin r[l*32] = 1'b0; r[l*32+16] = 1'b0; end
      end
    end
    return r;
  endfunction

  // ring_rows is the number of message rows of the slot ring: 2N (the
  // early-wrap bug: one fewer, while the window still admits 2N messages).
  function automatic int ring_rows();
    if (cfg_bug == BUG_EARLY_WRAP && cfg_window > 1) return 2 * int'(cfg_window) - 1;
    if (cfg_bug == BUG_EARLY_WRAP) return 1;
    return 2 * int'(cfg_window);
  endfunction

  // The usual offsets of the UDP header and the BTH: IPv4 without options,
  // IPv6 without extension headers, RoCEv1's GRH.
  function automatic int std_udp(); return cfg_enc == ENC_V4 ? 34 : 54; endfunction
  function automatic int std_bth(); return cfg_enc == ENC_V4 ? 42 : cfg_enc == ENC_V6 ? 62 : 54; endfunction

  function automatic int frame_base(input int s, input int r); return (s * NPORT + r) * FSTRIDE; endfunction

  // ---- streaming ports ---------------------------------------------------
  always_comb begin
    for (int p = 0; p < NPORT; p++) begin
      s_tready[p] = (state == S_RX) && (rxport == p);
      m_tvalid[p] = (state == S_TX || state == S_FWD) && (txport == p);
      m_tlast[p]  = (ptr + 8 >= txlen);
      m_tkeep[p]  = (ptr + 8 >= txlen) ? 8'((32'd1 << (txlen - ptr)) - 1) : 8'hFF;
      for (int i = 0; i < 8; i++)
        m_tdata[p][i*8 +: 8] = tx_from_rx ? rxbuf[(ptr + i) % RXMAX] : txbuf[(ptr + i) % FSTRIDE];
    end
  end
  assign busy = (state != S_IDLE);

  // ---- the datapath --------------------------------------------------------
  always_ff @(posedge clk) begin
    if (rst) begin
      // The slot metadata is a memory: it is cleared after reset, one
      // entry a cycle (S_CLR), as a block RAM would have to be.
      state <= S_CLR; ptr <= 0;
      rr <= 0;
      released <= 0; relrow <= 0;
      for (int r = 0; r < NPORT; r++) begin
        c_hqp[r] <= 0; c_anch[r] <= 0; c_newest[r] <= 32'hFFFFFFFF; c_newk[r] <= 0;
      end
      n_frames_in <= 0; n_bytes_in <= 0; n_frames_out <= 0; n_busy_cycles <= 0;
      n_aggregated <= 0; n_results <= 0; n_resends <= 0; n_icrc_drops <= 0; n_other_drops <= 0; n_forwards <= 0;
    end else begin
      if (state != S_IDLE && state != S_CLR) n_busy_cycles <= n_busy_cycles + 1;
      case (state)
      S_CLR: begin
        sl_have[ptr] <= 0; sl_done[ptr] <= 0;
        ptr <= ptr + 1;
        if (ptr + 1 >= NSLOT) state <= S_IDLE;
      end

      // Take the next port with a frame, round robin.
      S_IDLE: begin
        for (int k = 1; k <= NPORT; k++) begin
          automatic int p = (rr + k) % NPORT;
          if (s_tvalid[p]) begin
            rxport <= p; rr <= p; rxlen <= 0; rxover <= 0; crc <= CRC_LRH; state <= S_RX;
            break;
          end
        end
      end

      S_RX: if (s_tvalid[rxport]) begin
        automatic int n = 0;
        for (int i = 0; i < 8; i++) if (s_tkeep[rxport][i]) begin
          if (rxlen + i < RXMAX) rxbuf[rxlen + i] <= s_tdata[rxport][i*8 +: 8];
          n++;
        end
        if (rxlen + n > RXMAX) rxover <= 1;
        rxlen <= rxlen + n;
        // The ICRC as the frame streams in, four bytes behind (the last
        // four are the ICRC itself), masked for the usual layout (IPv4
        // without options); S_PARSE falls back to a second pass otherwise.
        // Bytes of this beat come from s_tdata (write-first bypass: rxbuf
        // holds them only after this edge).
        begin
          automatic logic [31:0] c = crc;
          automatic int tot = rxlen + n;
          for (int i = 0; i < 8; i++) begin
            automatic int q = rxlen - 4 + i;
            automatic logic [7:0] b = i >= 4 ? s_tdata[rxport][(i-4)*8 +: 8] : (q >= 0 && q < RXMAX) ? rxbuf[q] : 8'h00;
            if (i < n && q >= 14 && q < RXMAX) c = crc8(c, icrc_mask(q, b, std_udp(), std_bth()));
          end
          crc <= c;
          if (s_tlast[rxport]) n_bytes_in <= n_bytes_in + 64'(tot);
        end
        if (s_tlast[rxport]) begin
          n_frames_in <= n_frames_in + 1;
          state <= S_PARSE;
        end
      end

      // Parse: a ring connection's RDMA WRITE goes on to the ICRC check,
      // anything else is forwarded.
      S_PARSE: begin
        automatic logic ok = 0;
        automatic int e = 0, ihl, tot, ulen, ext, pd, r;
        automatic int t_udp = 0, t_bth = 0;
        automatic logic [7:0] op = 0;
        if (rxover) begin
          n_other_drops <= n_other_drops + 1; state <= S_IDLE;
        end else begin
          if (cfg_agg && rxlen >= 14 + 40) begin
            if (cfg_enc == ENC_V6 && rx16(12) == 16'h86DD && rxbuf[14][7:4] == 6 && rxbuf[20] == 8'd17) begin
              t_udp = 54; e = 54 + int'(rx16(18));
              if (e <= rxlen && rx16(t_udp + 2) == 16'd4791) begin
                ulen = int'(rx16(t_udp + 4));
                if (ulen >= 8 && t_udp + ulen <= e) begin e = t_udp + ulen; t_bth = t_udp + 8; ok = 1; end
              end
            end else if (cfg_enc == ENC_V4 && rx16(12) == 16'h0800 && rxbuf[14][7:4] == 4) begin
              ihl = int'(rxbuf[14][3:0]) * 4;
              tot = int'(rx16(16));
              if (ihl >= 20 && tot >= ihl && tot <= rxlen - 14 && rxbuf[23] == 8'd17 && (rx16(20) & 16'h3FFF) == 0) begin
                t_udp = 14 + ihl; e = 14 + tot;
                if (e - t_udp >= 8 && rx16(t_udp + 2) == 16'd4791) begin
                  ulen = int'(rx16(t_udp + 4));
                  if (ulen >= 8 && t_udp + ulen <= e) begin e = t_udp + ulen; t_bth = t_udp + 8; ok = 1; end
                end
              end
            end else if (cfg_enc == ENC_V1 && rx16(12) == 16'h8915 && rxbuf[14][7:4] == 6 && rxbuf[20] == 8'h1B) begin
              e = 54 + int'(rx16(18));
              if (e <= rxlen) begin t_bth = 54; ok = 1; end
            end
          end
          if (ok && e - t_bth < 16) ok = 0;
          if (ok) begin
            op = rxbuf[t_bth];
            pd = int'(rxbuf[t_bth+1][5:4]);
            ext = (op == OP_FIRST || op == OP_ONLY) ? 16 : (op == OP_ONLY_IMM) ? 20 : (op == OP_LAST_IMM) ? 4 : 0;
            if (op < 8'h06 || op > 8'h0B) ok = 0;               // not an RC RDMA WRITE
            if (e - 4 - pd - (t_bth + 12 + ext) < 0) ok = 0;
          end
          r = -1;
          if (ok) begin
            automatic int src = cfg_enc == ENC_V4 ? 26 : 22, dst = cfg_enc == ENC_V4 ? 30 : 38;
            for (int k = 0; k < NPORT; k++)
              if (r < 0 && k < int'(cfg_workers) && is_host_addr(src, k) && is_host_addr(dst, (k + 1) % int'(cfg_workers))) r = k;
          end
          if (!ok || r < 0) begin
            state <= S_FWD; ptr <= 0; txlen <= rxlen; tx_from_rx <= 1; fwd_mask <= '0;
            begin
              automatic int p = mac_port({rxbuf[0], rxbuf[1], rxbuf[2], rxbuf[3], rxbuf[4], rxbuf[5]});
              automatic logic [NPORT-1:0] mask = '0;
              if (p >= 0) mask[p] = 1'b1;
              else for (int k = 0; k < NPORT; k++) if (k < int'(cfg_workers) && k != rxport) mask[k] = 1'b1;
              fwd_mask <= mask;
              txport <= -1;
              for (int k = 0; k < NPORT; k++) if (mask[k]) begin txport <= k; break; end
              if (mask == 0) state <= S_IDLE;
            end
            n_forwards <= n_forwards + 1;
          end else if (r != rxport) begin
            n_other_drops <= n_other_drops + 1; state <= S_IDLE;      // a member's addresses from another port
          end else if (c_hqp[r] && {rxbuf[t_bth+5], rxbuf[t_bth+6], rxbuf[t_bth+7]} != c_qp[r]) begin
            // Another QP pair between the same hosts: not the ring.
            state <= S_FWD; ptr <= 0; txlen <= rxlen; tx_from_rx <= 1;
            fwd_mask <= '0; txport <= (r + 1) % int'(cfg_workers);
            n_forwards <= n_forwards + 1;
          end else begin
            rank <= r; udp <= t_udp; bth <= t_bth; icrc <= e - 4;
            pay <= t_bth + 12 + ext; paylen <= e - 4 - pd - (t_bth + 12 + ext);
            psn <= {rxbuf[t_bth+9], rxbuf[t_bth+10], rxbuf[t_bth+11]};
            first <= (op == OP_FIRST || op == OP_ONLY || op == OP_ONLY_IMM);
            middle <= (op == 8'h07);
            if ((cfg_enc == ENC_V1 || t_udp == std_udp()) && t_bth == std_bth() && e == rxlen) begin
              // The ICRC computed on the way in covers this frame.
              if (~crc != {rxbuf[e-1], rxbuf[e-2], rxbuf[e-3], rxbuf[e-4]} && cfg_bug != BUG_NO_ICRC_CHECK) begin
                n_icrc_drops <= n_icrc_drops + 1; state <= S_IDLE;
              end else state <= S_LOC;
            end else begin
              ptr <= 14; crc <= CRC_LRH;
              state <= S_ICRC;
            end
          end
        end
      end

      // ICRC over the masked headers and the payload, 8 bytes a cycle.
      S_ICRC: begin
        automatic logic [31:0] c = crc;
        for (int i = 0; i < 8; i++) if (ptr + i < icrc) c = crc8(c, icrc_mask(ptr + i, rxbuf[ptr + i], udp, bth));
        crc <= c;
        ptr <= ptr + 8;
        if (ptr + 8 >= icrc) begin
          if (~c != {rxbuf[icrc+3], rxbuf[icrc+2], rxbuf[icrc+1], rxbuf[icrc]} && cfg_bug != BUG_NO_ICRC_CHECK) begin
            n_icrc_drops <= n_icrc_drops + 1; state <= S_IDLE;
          end else state <= S_LOC;
        end
      end

      // Locate: message and offset from the PSN's distance to the newest
      // message start of the connection (every message but the last has
      // msg-len packets; the INA header of a first packet names MsgID and
      // the message's own packet count).
      S_LOC: begin
        automatic logic bad = 0, lost = 0, adv = 0;
        automatic logic [31:0] amsg = c_amsg[rank];
        automatic logic [23:0] apsn = c_apsn[rank];
        automatic logic [23:0] dd, ad;
        automatic int q = 0, o = 0, L = int'(cfg_msglen), k = 0, id = 0;
        automatic logic [31:0] m = 0;
        if (first) begin
          if (paylen < 8 || {rxbuf[pay], rxbuf[pay+1], rxbuf[pay+2], rxbuf[pay+3]} != 32'h494E4131) bad = 1;
          else begin
            id = int'(rxbuf[pay+5]); k = int'(rxbuf[pay+6]);
            if (rxbuf[pay+4] != 0 || int'(rxbuf[pay+7]) != rank || k < 1 || k > L) bad = 1;
          end
          if (!bad) begin
            if (!c_hqp[rank]) begin c_hqp[rank] <= 1; c_qp[rank] <= {rxbuf[bth+5], rxbuf[bth+6], rxbuf[bth+7]}; end
            if (!c_anch[rank]) begin amsg = 32'(id); apsn = psn; c_anch[rank] <= 1; end
          end
        end else if (!c_anch[rank]) lost = 1;
        if (!bad && !lost) begin
          // d = psn - apsn as a signed 24-bit distance; q = floor(d / L).
          dd = psn - apsn;
          ad = dd[23] ? -dd : dd;
          q = int'(ad) / L; o = int'(ad) % L;   // a 24/8-bit divider
          if (dd[23]) begin q = -q; if (o != 0) begin q = q - 1; o = L - o; end end
          m = amsg + 32'(q);
          if (first) begin
            if (o != 0 || $signed(m) < 0 || m[7:0] != 8'(id)) bad = 1;
            else if ($signed(m) > $signed(c_newest[rank])) begin
              c_newest[rank] <= m; c_newk[rank] <= 8'(k); amsg = m; apsn = psn; adv = 1;
            end
          end else begin
            if ($signed(m) > $signed(c_newest[rank]) || (m == c_newest[rank] && o >= int'(c_newk[rank]))) lost = 1;
            else if (o == 0 || $signed(m) < 0) bad = 1;
          end
        end
        c_amsg[rank] <= amsg; c_apsn[rank] <= apsn;
        doff <= pay + (o == 0 ? 8 : 0);
        dlen <= paylen - (o == 0 ? 8 : 0);
        if (!bad && !lost) begin
          if (paylen > int'(cfg_mtu) || ((paylen - (o == 0 ? 8 : 0)) % (cfg_dtype == 2 ? 2 : 4)) != 0 || rxlen > FSTRIDE) bad = 1;
        end
        msg <= m;
        sfb <= o;
        if (bad || lost) begin
          n_other_drops <= n_other_drops + 1; state <= S_IDLE;
        end else if (adv) begin
          // Safe release: message m's row is reused once every rank sent a
          // first packet of m+N (every receiver holds m).
          automatic logic [31:0] low = m;
          automatic logic none = 0;
          for (int r = 0; r < NPORT; r++) if (r < int'(cfg_workers) && r != rank) begin
            if ($signed(c_newest[r]) < 0) none = 1;
            else if ($signed(c_newest[r]) < $signed(low)) low = c_newest[r];
          end
          if (!none && $signed(low - 32'(cfg_window) + 1) > $signed(released)) begin
            rel_from <= int'(released); rel_to <= int'(low - 32'(cfg_window) + 1);
            rel_i <= 0; rel_j <= 0;
            state <= S_REL;
          end else state <= S_PLACE;
        end else state <= S_PLACE;
      end

      // Clear the rows of released messages (one slot a cycle), moving the
      // ring's oldest row along.
      S_REL: begin
        automatic int W2 = ring_rows(), L = int'(cfg_msglen);
        if (rel_from + rel_i >= rel_to || rel_i >= W2) begin
          released <= 32'(rel_to);
          relrow <= 8'((int'(relrow) + (rel_to - rel_from)) % W2);
          state <= S_PLACE;
        end else begin
          automatic int row = (int'(relrow) + rel_i) % W2;
          sl_have[row * L + rel_j] <= 0; sl_done[row * L + rel_j] <= 0;
          if (rel_j + 1 >= L) begin rel_j <= 0; rel_i <= rel_i + 1; end
          else rel_j <= rel_j + 1;
        end
      end

      // Place: the packet's slot is (row of its message) * L + offset,
      // the row counted from the ring's oldest.
      S_PLACE: begin
        automatic int W2 = 2 * int'(cfg_window), L = int'(cfg_msglen), R = ring_rows(), row, s;
        if ($signed(msg) < $signed(released)) begin
          // Released: its receiver has the result; it re-ACKs and discards this.
          state <= S_FWD; ptr <= 0; txlen <= rxlen; tx_from_rx <= 1;
          fwd_mask <= '0; txport <= (rank + 1) % int'(cfg_workers);
          n_forwards <= n_forwards + 1;
        end else if ($signed(msg) >= $signed(released + 32'(W2))) begin
          n_other_drops <= n_other_drops + 1; state <= S_IDLE;
        end else begin
          row = int'(relrow) + int'(msg - released);
          if (row >= R) row = row - R;
          s = row * L + sfb;
          if (cfg_bug == BUG_PSN_OFF_BY_ONE && middle) s = s + 1;
          if (s >= R * L) s = s - R * L;
          slot <= s;
          if (sl_done[s]) begin
            if (dlen != int'(sl_n[s])) begin n_other_drops <= n_other_drops + 1; state <= S_IDLE; end
            else begin
              // A re-sent gradient: answer with the stored result.
              emitting <= 0; tx_doff <= doff; tx_udp <= udp; tx_icrc <= icrc; txlen <= rxlen;
              ptr <= 0; state <= S_BUILD; n_resends <= n_resends + 1;
            end
          end else if (sl_have[s] != 0 && dlen != int'(sl_n[s])) begin
            n_other_drops <= n_other_drops + 1; state <= S_IDLE;   // the ranks disagree on its length
          end else begin
            ptr <= 0; state <= S_TAKE;
          end
        end
      end

      // Store the frame in the slot, 8 bytes a cycle.
      S_TAKE: begin
        automatic int b = frame_base(slot, rank);
        for (int i = 0; i < 8; i++) if (ptr + i < rxlen) fmem[b + ptr + i] <= rxbuf[ptr + i];
        ptr <= ptr + 8;
        if (ptr + 8 >= rxlen) begin
          automatic logic [NPORT-1:0] have = sl_have[slot] | (NPORT'(1) << rank);
          automatic logic [NPORT-1:0] full = (NPORT'(1) << cfg_workers) - 1;
          sl_have[slot] <= have; sl_n[slot] <= 13'(dlen);
          fr_len[slot*NPORT + rank] <= 14'(rxlen); fr_doff[slot*NPORT + rank] <= 14'(doff);
          fr_udp[slot*NPORT + rank] <= 14'(udp); fr_icrc[slot*NPORT + rank] <= 14'(icrc);
          if (have == full) begin ptr <= 0; state <= S_SUM; end
          else state <= S_IDLE;
        end
      end

      // Sum the slot in rank order, 8 bytes (2 int32/f32 or 4 f16 lanes)
      // a cycle: ((x0 + x1) + x2) + ...
      S_SUM: begin
        automatic logic [63:0] acc, x;
        for (int r = 0; r < NPORT; r++) if (r < int'(cfg_workers)) begin
          automatic int b = frame_base(slot, r) + int'(fr_doff[slot*NPORT + r]) + ptr;
          for (int i = 0; i < 8; i++) x[i*8 +: 8] = fmem[b + i];
          if (r == 0) acc = x; else acc = add64(acc, x);
        end
        for (int i = 0; i < 8; i++) smem[slot * SUMSTRIDE + ptr + i] <= acc[i*8 +: 8];
        ptr <= ptr + 8;
        if (ptr + 8 >= int'(sl_n[slot])) begin
          sl_done[slot] <= 1; n_aggregated <= n_aggregated + 1;
          emitting <= 1; emit_k <= 0;
          tx_doff <= int'(fr_doff[slot*NPORT]); tx_udp <= int'(fr_udp[slot*NPORT]);
          tx_icrc <= int'(fr_icrc[slot*NPORT]); txlen <= int'(fr_len[slot*NPORT]);
          ptr <= 0; state <= S_BUILD;
        end
      end

      // Build a result: rank emit_k's stored frame (or, for a re-send,
      // the frame just taken in) with the slot's sum in place of its data.
      // Its fresh ICRC is computed as it is built, and written over the
      // old one after the last beat.
      S_BUILD: begin
        automatic int b = frame_base(slot, emit_k);
        automatic int tb = cfg_enc == ENC_V1 ? 54 : tx_udp + 8;
        automatic logic [31:0] c = (ptr == 0) ? CRC_LRH : crc;
        for (int i = 0; i < 8; i++) begin
          automatic int j = ptr + i;
          automatic logic [7:0] v = emitting ? fmem[b + j] : rxbuf[j];
          if (j >= tx_doff && j < tx_doff + int'(sl_n[slot])) v = smem[slot * SUMSTRIDE + j - tx_doff];
          if (j < txlen) txbuf[j] <= v;
          if (j >= 14 && j < tx_icrc) c = crc8(c, icrc_mask(j, v, tx_udp, tb));
        end
        crc <= c;
        ptr <= ptr + 8;
        if (ptr + 8 >= txlen) begin
          automatic int p;
          {txbuf[tx_icrc+3], txbuf[tx_icrc+2], txbuf[tx_icrc+1], txbuf[tx_icrc]} <= ~c;
          p = mac_port({txbuf[0], txbuf[1], txbuf[2], txbuf[3], txbuf[4], txbuf[5]});
          txport <= p; tx_from_rx <= 0; ptr <= 0;
          state <= (p < 0) ? S_IDLE : S_TX;
        end
      end

      S_TX: if (m_tready[txport]) begin
        ptr <= ptr + 8;
        if (ptr + 8 >= txlen) begin
          n_frames_out <= n_frames_out + 1;
          if (emitting) n_results <= n_results + 1;
          if (emitting && emit_k + 1 < int'(cfg_workers)) begin
            automatic int k = emit_k + 1;
            emit_k <= k;
            tx_doff <= int'(fr_doff[slot*NPORT + k]); tx_udp <= int'(fr_udp[slot*NPORT + k]);
            tx_icrc <= int'(fr_icrc[slot*NPORT + k]); txlen <= int'(fr_len[slot*NPORT + k]);
            ptr <= 0; state <= S_BUILD;
          end else state <= S_IDLE;
        end
      end

      // Forward rxbuf unchanged to every port in fwd_mask (or txport).
      S_FWD: if (m_tready[txport]) begin
        ptr <= ptr + 8;
        if (ptr + 8 >= txlen) begin
          automatic logic [NPORT-1:0] mask = fwd_mask;
          automatic int nxt = -1;
          n_frames_out <= n_frames_out + 1;
          mask[txport] = 1'b0;
          for (int k = 0; k < NPORT; k++) if (nxt < 0 && mask[k]) nxt = k;
          fwd_mask <= mask; ptr <= 0;
          if (nxt < 0) state <= S_IDLE; else txport <= nxt;
        end
      end

      default: state <= S_IDLE;
      endcase
    end
  end
endmodule
