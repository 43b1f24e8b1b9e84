package main

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/inaemu/inaemu/emu"
	"github.com/inaemu/inaemu/emu/workload"
	"github.com/inaemu/inaemu/frames"
	"github.com/inaemu/inaemu/frames/inceptionn"
	"github.com/inaemu/inaemu/tensor"
)

// codecArgs are 'inaemu codec' flags.
type codecArgs struct {
	bound   int
	values  []string
	pattern string
	count   int
	seed    uint64
	mtu     int
	asJSON  bool
}

// codecCommand is 'inaemu codec': INCEPTIONN's gradient codec on given
// values, or on a generated stream.
func codecCommand(stdout, stderr io.Writer) *cobra.Command {
	var a codecArgs
	c := newCommand("codec", "show INCEPTIONN's gradient compression (MICRO '18, Algorithms 2 and 3) of values or of a generated stream", stdout, stderr,
		func(e *cmdEnv, _ []string) int { return runCodec(e, a) })
	c.Args = noArgs
	c.Long = `INCEPTIONN compresses each float32 to a 2-bit tag and a field of 0, 8, 16 or 32 bits for an error
bound of 2^-K: zero below 2^-K, sign and 7 fraction bits below 2^-floor(K/2), sign and 15 fraction
bits below 1, the raw 32 bits from 1 up and for Inf and NaN. Fractions are truncated toward zero, so
the error for |f| < 1 stays below max(2^-K, 2^-7): for K = 8 and 10 that is 2^-7, not 2^-K.

With --values it shows, per value, its bits, tag, field (hex) and the value decoded, to compare
with another implementation: values are decimals, inf, nan or raw bits as 0x3f400000. With
--pattern it compresses --count values of a generated stream once (random: uniform in [-1, 1);
zeros, ones, ramp; lognormal:MU,SIGMA: magnitudes e^N(MU,SIGMA) with random signs, or the presets
lognormal:resnet50 and lognormal:hdc fitted to Table III; table3:NETWORK[,K]: values whose classes
have the shares Table III gives for alexnet, hdc, resnet50 or vgg16 at bound 2^-K, 6, 8 or 10,
default --bound), the same values a run's rank 0 gets with that --pattern and --seed, and reports the
class histogram, the codec's ratio (32 bits over the mean bits per value, tags included: Table
III's measure), the payload ratio of the stream packed in --mtu-byte packets (each with its 2-byte
length and padding) and the wire ratio those packets give with RoCEv2/IPv4's 82 bytes of headers,
ICRC and Ethernet framing per packet.`
	f := c.Flags()
	f.IntVar(&a.bound, "bound", 10, "K: the error bound is 2^-K (the paper uses 6, 8 and 10)")
	f.StringSliceVar(&a.values, "values", nil, "values to compress, comma-separated")
	f.StringVar(&a.pattern, "pattern", "", "a stream to compress: random, zeros, ones, ramp, lognormal:MU,SIGMA, lognormal:resnet50|hdc or table3:alexnet|hdc|resnet50|vgg16[,K]")
	f.IntVar(&a.count, "count", 1<<20, "with --pattern: how many values")
	f.Uint64Var(&a.seed, "seed", 1, "with --pattern: the generator's seed")
	f.IntVar(&a.mtu, "mtu", 4096, "with --pattern: payload bytes per packet")
	f.BoolVar(&a.asJSON, "json", false, "print one JSON object")
	return c
}

// codecValue is one value's compression.
type codecValue struct {
	Input       string  `json:"input"`
	Bits        string  `json:"bits"`
	Class       string  `json:"class"`
	Tag         string  `json:"tag"`
	FieldBits   int     `json:"field_bits"`
	Field       string  `json:"field"`
	DecodedText string  `json:"decoded"`
	DecodedBits string  `json:"decoded_bits"`
	Error       float64 `json:"abs_error"`
}

// codecStream is a generated stream's compression.
type codecStream struct {
	Bound             int                `json:"bound"`
	Pattern           string             `json:"pattern"`
	Seed              uint64             `json:"seed"`
	Values            int                `json:"values"`
	Classes           map[string]int64   `json:"classes"`
	Shares            map[string]float64 `json:"shares"`
	CodecRatio        float64            `json:"codec_ratio"`
	MTU               int                `json:"mtu"`
	Packets           int                `json:"packets"`
	Uncompressed      int                `json:"packets_left_uncompressed"`
	PayloadRatio      float64            `json:"payload_ratio"`
	WireRatio         float64            `json:"wire_ratio"`
	MaxAbsError       float64            `json:"max_abs_error"`
	MaxAbsErrorBelow1 float64            `json:"max_abs_error_below_1"`
}

// wireOverhead is what a RoCEv2/IPv4 packet adds to its payload on the
// wire, as a run counts it.
var wireOverhead = emu.PerPacketBytes(frames.V2IPv4)

func runCodec(e *cmdEnv, a codecArgs) int {
	c, err := inceptionn.New(a.bound)
	if err != nil {
		e.usageError("--bound %d: want %d..%d (the error bound is 2^-K)", a.bound, inceptionn.MinBound, inceptionn.MaxBound)
		return exitUsage
	}
	switch {
	case len(a.values) > 0 && a.pattern != "":
		e.usageError("--values and --pattern: give one")
		return exitUsage
	case len(a.values) > 0:
		return codecValues(e, c, a)
	case a.pattern != "":
		return codecPattern(e, c, a)
	}
	e.usageError("give --values x,y,... or --pattern P")
	return exitUsage
}

// parseFloat32 reads a decimal, inf, nan or 0x-prefixed raw bits.
func parseFloat32(s string) (uint32, error) {
	if h, ok := strings.CutPrefix(strings.ToLower(s), "0x"); ok {
		v, err := strconv.ParseUint(h, 16, 32)
		return uint32(v), err
	}
	v, err := strconv.ParseFloat(s, 32)
	if err != nil && !errors.Is(err, strconv.ErrRange) {
		return 0, err
	}
	return math.Float32bits(float32(v)), nil
}

func codecValues(e *cmdEnv, c inceptionn.Codec, a codecArgs) int {
	var rows []codecValue
	for _, s := range a.values {
		s = strings.TrimSpace(s)
		f, err := parseFloat32(s)
		if err != nil {
			e.usageError("--values %q: want a decimal, inf, nan or raw bits such as 0x3f400000", s)
			return exitUsage
		}
		t, v := c.Encode(f)
		d := inceptionn.Decode(t, v)
		x, y := float64(math.Float32frombits(f)), float64(math.Float32frombits(d))
		r := codecValue{Input: s, Bits: fmt.Sprintf("0x%08x", f), Class: t.String(), Tag: fmt.Sprintf("%02b", uint8(t)), FieldBits: t.Bits(),
			DecodedText: strconv.FormatFloat(y, 'g', -1, 32), DecodedBits: fmt.Sprintf("0x%08x", d), Error: math.Abs(x - y)}
		if t.Bits() > 0 {
			r.Field = fmt.Sprintf("0x%0*x", t.Bits()/4, v)
		}
		if t == inceptionn.Raw {
			r.Error = 0 // the same bits (Inf and NaN too)
		}
		rows = append(rows, r)
	}
	if a.asJSON {
		return e.writeJSONAs(reportSchema("codec.values"), map[string]any{"bound": a.bound, "error_bound_exponent": 127 - a.bound, "values": rows})
	}
	fmt.Fprintf(e.stdout, "INCEPTIONN codec, error bound 2^-%d (error_bound exponent %d)\n", a.bound, 127-a.bound)
	tw := tabwriter.NewWriter(e.stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "VALUE\tBITS\tTAG\tCLASS\tFIELD\tDECODED\tDECODED BITS\tABS ERROR")
	for _, r := range rows {
		field := r.Field
		if field == "" {
			field = "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%.3g\n", r.Input, r.Bits, r.Tag, r.Class, field, r.DecodedText, r.DecodedBits, r.Error)
	}
	_ = tw.Flush()
	return exitOK
}

// genStream fills buf with the pattern's values, as a job's rank 0 with
// that pattern and seed would have them (a Table III pattern without its
// own bound takes --bound).
func genStream(pattern string, k int, seed uint64, buf []byte) error {
	p, err := emu.ParsePattern(pattern)
	if err != nil {
		if !strings.Contains(pattern, ":") {
			return fmt.Errorf("--pattern %s: want random, zeros, ones, ramp, lognormal:MU,SIGMA, lognormal:resnet50|hdc or table3:NETWORK[,K]", pattern)
		}
		return fmt.Errorf("--pattern: %v", err)
	}
	cfg := emu.Config{Pattern: p, DType: tensor.F32, Compress: k}
	if err := cfg.ResolvePattern(); err != nil {
		return err
	}
	workload.NewStream(tensor.F32, cfg.Pattern, 0, seed).Fill(buf)
	return nil
}

func codecPattern(e *cmdEnv, c inceptionn.Codec, a codecArgs) int {
	switch {
	case a.count < 1 || a.count > 1<<28:
		e.usageError("--count %d: want 1..%d values", a.count, 1<<28)
		return exitUsage
	case a.mtu < 4 || a.mtu > inceptionn.MaxPayload:
		e.usageError("--mtu %d: want 4..%d payload bytes", a.mtu, inceptionn.MaxPayload)
		return exitUsage
	}
	buf := make([]byte, 4*a.count)
	if err := genStream(a.pattern, a.bound, a.seed, buf); err != nil {
		e.usageError("%v", err)
		return exitUsage
	}
	st := codecStream{Bound: a.bound, Pattern: a.pattern, Seed: a.seed, Values: a.count, MTU: a.mtu,
		Classes: map[string]int64{}, Shares: map[string]float64{}}
	var h inceptionn.Histogram
	var packed, back []byte
	var plain, sent, wirePlain, wireSent int64
	for off := 0; off < len(buf); off += a.mtu {
		p := buf[off:min(off+a.mtu, len(buf))]
		packed, _ = c.AppendPacked(packed[:0], p, &h) // p fits: --mtu is at most MaxPayload
		n := int64(len(packed))
		if n > int64(a.mtu) { // it would grow past the MTU: sent as it is
			n = int64(len(p))
			st.Uncompressed++
		}
		st.Packets++
		plain += int64(len(p))
		sent += n
		wirePlain += int64(len(p)) + wireOverhead
		wireSent += n + wireOverhead
		// The error of what the receiver unpacks.
		var err error
		if back, err = inceptionn.Unpack(back[:0], packed, nil); err != nil {
			fmt.Fprintf(e.stderr, "inaemu %s: %v\n", e.name, err)
			return exitSoftware
		}
		for i := 0; i+4 <= len(p); i += 4 {
			x, y := math.Float32frombits(binary.LittleEndian.Uint32(p[i:])), math.Float32frombits(binary.LittleEndian.Uint32(back[i:]))
			if d := math.Abs(float64(x) - float64(y)); !math.IsNaN(d) {
				st.MaxAbsError = max(st.MaxAbsError, d)
				if math.Abs(float64(x)) < 1 {
					st.MaxAbsErrorBelow1 = max(st.MaxAbsErrorBelow1, d)
				}
			}
		}
	}
	for cl, n := range h {
		name := inceptionn.Class(cl).String()
		st.Classes[name] = n
		st.Shares[name] = float64(n) / float64(h.Values())
	}
	st.CodecRatio = 32 * float64(h.Values()) / float64(h.Bits())
	st.PayloadRatio = float64(plain) / float64(sent)
	st.WireRatio = float64(wirePlain) / float64(wireSent)
	if a.asJSON {
		return e.writeJSONAs(reportSchema("codec.stream"), st)
	}
	w := e.stdout
	fmt.Fprintf(w, "INCEPTIONN codec, error bound 2^-%d: %d values of %s (seed %d)\n", a.bound, a.count, a.pattern, a.seed)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "  CLASS\tWIRE BITS\tVALUES\tSHARE")
	for cl := range h {
		name := inceptionn.Class(cl).String()
		fmt.Fprintf(tw, "  %s\t%d\t%d\t%.1f%%\n", name, 2+inceptionn.Class(cl).Bits(), h[cl], 100*st.Shares[name])
	}
	_ = tw.Flush()
	fmt.Fprintf(w, "  codec ratio    %.2f× (32 bits over %.2f bits per value, tags included)\n", st.CodecRatio, 32/st.CodecRatio)
	fmt.Fprintf(w, "  payload ratio  %.2f× in %d packets of %d bytes (%d left uncompressed: they would grow)\n", st.PayloadRatio, st.Packets, a.mtu, st.Uncompressed)
	fmt.Fprintf(w, "  wire ratio     %.2f× with %d bytes of RoCEv2/IPv4 framing per packet\n", st.WireRatio, wireOverhead)
	fmt.Fprintf(w, "  max abs error  %.3g (%.3g for |f| < 1; the bound is max(2^-%d, 2^-7) = %.3g)\n", st.MaxAbsError, st.MaxAbsErrorBelow1, a.bound,
		math.Max(math.Ldexp(1, -a.bound), math.Ldexp(1, -7)))
	return exitOK
}
