package job

import (
	"encoding/binary"
	"fmt"
	"math"
	"strings"

	"github.com/inaemu/inaemu/emu/fabric"
	"github.com/inaemu/inaemu/emu/nic"
	"github.com/inaemu/inaemu/emu/nic/compress"
	"github.com/inaemu/inaemu/emu/workload"
	"github.com/inaemu/inaemu/frames"
	"github.com/inaemu/inaemu/frames/inceptionn"
	"github.com/inaemu/inaemu/tensor"
)

// In-NIC gradient compression (INCEPTIONN, MICRO '18): a job with
// Config.Compress = K gives every NIC its ranks use compression engines of
// bound 2^-K (emu/nic) and marks the QPs whose data legs compress; the
// transport never sees a compressed byte. What a rank receives is
// therefore what the engines make of what was sent: per packet, the
// values Decode(Encode(f)) when the packed payload is shorter than the
// payload, and the payload itself (sent unmarked) when it is not. That
// per-packet rule, packetTrip, is what a job's reference applies at every
// hop that crosses a NIC.

// CompressionReport is what a job's compression did: the engines' counts
// on its ranks' NICs (a NIC shared with another job counts both jobs'
// packets) and the largest difference between a result and the exact
// rank-order sum of the inputs.
type CompressionReport struct {
	K            int     `json:"k"` // the error bound is 2^-K
	PayloadRatio float64 `json:"payload_ratio"`
	// WireRatio is the data frames' bytes on the line, preamble, FCS and
	// gap included, without compression over with it.
	WireRatio    float64 `json:"wire_ratio"`
	Compressed   uint64  `json:"packets_compressed"`
	Uncompressed uint64  `json:"packets_uncompressed"` // marked, but packed they would not have been shorter
	// Classes counts the values through the transmit engines per class
	// (0, 8, 16 and 32 bits): of every packet marked for compression,
	// sent compressed or not, retransmissions included.
	Classes   inceptionn.Histogram `json:"classes"`
	MaxAbsErr float64              `json:"max_abs_err"`
	// Hops are the same per hop, over each message's first transmission:
	// a ring's steps (0 carries gradients, 1..H-2 partial sums, the
	// all-gather's H-1 steps sums), a wa job's gradient leg.
	Hops []HopReport `json:"hops,omitempty"`
	// Carried sums the hops by what they carry: gradients, partial sums,
	// sums (Hop is -1).
	Carried []HopReport `json:"carried,omitempty"`
}

// HopReport is what one hop of a compressing job carried.
type HopReport struct {
	Hop          int                  `json:"hop"`
	Carries      string               `json:"carries"` // gradients, partial sums or sums
	Values       int64                `json:"values"`
	Classes      inceptionn.Histogram `json:"classes"`
	PayloadRatio float64              `json:"payload_ratio"`
	// WireRatio is with the transport's per-packet headers, ICRC and
	// Ethernet framing (pad ignored).
	WireRatio float64 `json:"wire_ratio"`
	// MaxAbsErr is the largest change one trip made to a value this hop
	// carried (packets sent as they were change nothing).
	MaxAbsErr float64 `json:"max_abs_err"`
	// Packets, and their payload bytes before and after the engines.
	Packets      int64 `json:"packets"`
	PayloadBytes int64 `json:"payload_bytes"`
	WireBytes    int64 `json:"wire_payload_bytes"`
}

// Add counts a message's payload (packets of mtu bytes) as the engines
// will see it.
func (h *HopReport) Add(c *inceptionn.Codec, mtu int, p []byte) {
	for lo := 0; lo < len(p); lo += mtu {
		pkt := p[lo:min(lo+mtu, len(p))]
		packed, e := c.Measure(pkt, &h.Classes)
		h.PayloadBytes += int64(len(pkt))
		h.Packets++
		if packed < len(pkt) {
			h.WireBytes += int64(packed)
			h.MaxAbsErr = max(h.MaxAbsErr, e)
		} else {
			h.WireBytes += int64(len(pkt))
		}
	}
}

// finish fills the value count and the ratios, with perPacket bytes of
// framing per packet.
func (h *HopReport) finish(perPacket int64) {
	h.Values = h.Classes.Values()
	if h.WireBytes > 0 {
		h.PayloadRatio = float64(h.PayloadBytes) / float64(h.WireBytes)
		h.WireRatio = float64(h.PayloadBytes+h.Packets*perPacket) / float64(h.WireBytes+h.Packets*perPacket)
	}
}

// carried sums hops by what they carry, in the order gradients, partial
// sums, sums.
func carried(hops []HopReport, perPacket int64) []HopReport {
	var out []HopReport
	for _, kind := range []string{"gradients", "partial sums", "sums"} {
		k := HopReport{Hop: -1, Carries: kind}
		for _, h := range hops {
			if h.Carries == kind {
				k.Classes.Add(h.Classes)
				k.MaxAbsErr = max(k.MaxAbsErr, h.MaxAbsErr)
				k.Packets += h.Packets
				k.PayloadBytes += h.PayloadBytes
				k.WireBytes += h.WireBytes
			}
		}
		if k.Packets > 0 {
			k.finish(perPacket)
			out = append(out, k)
		}
	}
	return out
}

// HopMeter is a collective that measures what each of its hops carried.
type HopMeter interface{ HopReports() []HopReport }

// PerPacketBytes is what a data packet carries besides its payload on
// the wire: Ethernet, IP/GRH, UDP, BTH, ICRC, preamble, FCS and gap (a
// WRITE's middle packet: the RETH of a first packet is left out).
func PerPacketBytes(t frames.Transport) int64 {
	switch t {
	case frames.V2IPv6:
		return 14 + 40 + 8 + 12 + 4 + fabric.WireOverhead
	case frames.V1:
		return 14 + 40 + 12 + 4 + fabric.WireOverhead
	}
	return 14 + 20 + 8 + 12 + 4 + fabric.WireOverhead
}

// ErrorMeter is a collective that measures its results against the exact
// sum (a compressing job).
type ErrorMeter interface{ MaxAbsErr() float64 }

// Codec is the job's Codec (the settings were validated).
func (r *Job) Codec() *inceptionn.Codec {
	if r.Cfg.Compress == 0 {
		return nil
	}
	c, _ := inceptionn.New(r.Cfg.Compress)
	return &c
}

// enableCompression gives the job's NICs their engines; a NIC two jobs
// would compress on with different bounds is refused.
func (u *Session) enableCompression(r *Job) error {
	if r.Cfg.Compress == 0 {
		return nil
	}
	c := r.Codec()
	for _, w := range r.Workers {
		if k, ok := u.engines[w.NIC]; ok {
			if k.bound != r.Cfg.Compress || k.rate != r.Cfg.CompressRate {
				return fmt.Errorf("job %s: %s already compresses for job %s with bound 2^-%d at %g bit/s: a NIC has one pair of engines",
					r.Name, w.NIC.Name, k.job, k.bound, k.rate)
			}
			continue
		}
		if err := compress.Enable(w.NIC, compress.Config{Codec: *c, Rate: r.Cfg.CompressRate}); err != nil {
			return fmt.Errorf("job %s: %v", r.Name, err)
		}
		u.engines[w.NIC] = engineUse{job: r.Name, bound: r.Cfg.Compress, rate: r.Cfg.CompressRate}
	}
	return nil
}

// engineUse is the job that first gave a NIC its engines, and with what.
type engineUse struct {
	job   string
	bound int
	rate  float64
}

// MarkPath marks a path for compression.
func MarkPath(p frames.Path) frames.Path {
	p.TClass = frames.CompressedDSCP<<2 | p.TClass&3
	return p
}

// compressionReport sums the engines of the job's NICs.
func (r *Job) compressionReport() *CompressionReport {
	var s nic.CompressionStats
	seen := map[*nic.NIC]bool{}
	for _, w := range r.Workers {
		if seen[w.NIC] || w.NIC.Stats.Compression == nil {
			continue
		}
		seen[w.NIC] = true
		s.Add(w.NIC.Stats.Compression)
	}
	rep := &CompressionReport{K: r.Cfg.Compress, Compressed: s.TxCompressed, Uncompressed: s.TxUncompressed, Classes: s.TxClasses}
	if s.TxWirePayload > 0 {
		rep.PayloadRatio = float64(s.TxPayload) / float64(s.TxWirePayload)
		pkts := s.TxCompressed + s.TxUncompressed
		rep.WireRatio = float64(s.TxRawFrameBytes+pkts*fabric.WireOverhead) / float64(s.TxFrameBytes+pkts*fabric.WireOverhead)
	}
	if m, ok := r.Alg.(ErrorMeter); ok {
		rep.MaxAbsErr = m.MaxAbsErr()
	}
	if m, ok := r.Alg.(HopMeter); ok {
		rep.Hops = m.HopReports()
		per := PerPacketBytes(r.Cfg.Transport)
		for i := range rep.Hops {
			rep.Hops[i].finish(per)
		}
		rep.Carried = carried(rep.Hops, per)
	}
	return rep
}

// PacketTrip is what a message of payload p (packets of mtu bytes from
// its start) is after one trip through the engines: each packet's values
// projected when its packed form is shorter, left as they are when not.
func PacketTrip(c *inceptionn.Codec, mtu int, p []byte) {
	for lo := 0; lo < len(p); lo += mtu {
		pkt := p[lo:min(lo+mtu, len(p))]
		if c.PackedLen(pkt) < len(pkt) {
			c.Project(pkt)
		}
	}
}

// MaxAbsDiff is the largest |got[i] - want[i]| of two float32 slices
// (little-endian), Inf when one of a pair is NaN and the other not.
func MaxAbsDiff(got, want []byte, m float64) float64 {
	for i := 0; i+4 <= len(got); i += 4 {
		g := float64(math.Float32frombits(binary.LittleEndian.Uint32(got[i:])))
		w := float64(math.Float32frombits(binary.LittleEndian.Uint32(want[i:])))
		if g == w || math.IsNaN(g) && math.IsNaN(w) {
			continue
		}
		if d := math.Abs(g - w); math.IsNaN(d) {
			m = math.Inf(1)
		} else {
			m = max(m, d)
		}
	}
	return m
}

// ParsePattern reads a tensor pattern: workload.ParsePattern's, or
// table3:NET[,K], values whose codec classes have the shares Table III
// gives for NET (alexnet, hdc, resnet50, vgg16) at the bound 2^-K (6, 8
// or 10; without K, the job's --compress bound).
func ParsePattern(s string) (workload.Pattern, error) {
	rest, ok := strings.CutPrefix(s, "table3:")
	if !ok {
		return workload.ParsePattern(s)
	}
	net, k, hasK := strings.Cut(rest, ",")
	if _, ok := inceptionn.Table3[net]; !ok {
		return workload.Pattern{}, fmt.Errorf("tensor pattern %q: Table III has alexnet, hdc, resnet50 and vgg16", s)
	}
	p := workload.Pattern{Kind: workload.KindClasses, Name: net}
	if hasK {
		b, err := inceptionn.ParseBound(k)
		if err != nil {
			return workload.Pattern{}, fmt.Errorf("tensor pattern %q: %v", s, err)
		}
		p.Bound = b
	}
	return p, nil
}

// ResolvePattern gives a Table III pattern its shares: at its own bound,
// or the job's compression bound; and refuses gradient patterns of other
// element types than float32.
func (c *Config) ResolvePattern() error {
	p := &c.Pattern
	if p.Gradient() && c.DType != tensor.F32 {
		return fmt.Errorf("--pattern %s: gradient patterns are float32, not %s", p, c.DType)
	}
	if p.Kind != workload.KindClasses {
		return nil
	}
	if p.Bound == 0 {
		p.Bound = c.Compress
	}
	if p.Bound == 0 {
		return fmt.Errorf("--pattern %s: Table III's shares depend on the bound: name it (table3:%s,10) or compress (--compress 2^-10)", p, p.Name)
	}
	row, ok := inceptionn.Table3[p.Name][p.Bound]
	if !ok {
		return fmt.Errorf("--pattern %s: Table III has the bounds 2^-6, 2^-8 and 2^-10, not 2^-%d", p, p.Bound)
	}
	p.Shares = row
	return nil
}
