package emu

import (
	"fmt"
	"math"

	"github.com/inaemu/inaemu/emu/fabric"
	"github.com/inaemu/inaemu/emu/nic"
	"github.com/inaemu/inaemu/frames"
	"github.com/inaemu/inaemu/frames/inceptionn"
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
	// Classes counts the values the engines compressed per class: 0, 8, 16
	// and 32 bits.
	Classes   inceptionn.Histogram `json:"classes"`
	MaxAbsErr float64              `json:"max_abs_err"`
}

// errorMeter is a collective that measures its results against the exact
// sum (a compressing job).
type errorMeter interface{ maxAbsErr() float64 }

// dataLegs is a collective whose compression applies to some of its
// ranks' sends only (wa: the gradients, not the results).
type dataLegs interface{ compressesFrom(w *worker) bool }

// compressesFrom reports whether rank w's send QP is marked for
// compression.
func (r *runner) compressesFrom(w *worker) bool {
	if r.cfg.Compress == 0 {
		return false
	}
	if d, ok := r.job.(dataLegs); ok {
		return d.compressesFrom(w)
	}
	return true
}

// codec is the job's codec (the settings were validated).
func (r *runner) codec() *inceptionn.Codec {
	if r.cfg.Compress == 0 {
		return nil
	}
	c, _ := inceptionn.New(r.cfg.Compress)
	return &c
}

// enableCompression gives the job's NICs their engines; a NIC two jobs
// would compress on with different bounds is refused.
func (u *run) enableCompression(r *runner) error {
	if r.cfg.Compress == 0 {
		return nil
	}
	c := r.codec()
	for _, w := range r.workers {
		if k, ok := u.engines[w.h]; ok {
			if k.bound != r.cfg.Compress || k.rate != r.cfg.CompressRate {
				return fmt.Errorf("job %s: %s already compresses for job %s with bound 2^-%d at %g bit/s: a NIC has one pair of engines",
					r.name, w.h.Name, k.job, k.bound, k.rate)
			}
			continue
		}
		if err := w.h.EnableCompression(nic.Compression{Codec: *c, Rate: r.cfg.CompressRate}); err != nil {
			return fmt.Errorf("job %s: %v", r.name, err)
		}
		u.engines[w.h] = engineUse{job: r.name, bound: r.cfg.Compress, rate: r.cfg.CompressRate}
	}
	return nil
}

// engineUse is the job that first gave a NIC its engines, and with what.
type engineUse struct {
	job   string
	bound int
	rate  float64
}

// markPath marks a path for compression.
func markPath(p frames.Path) frames.Path {
	p.TClass = frames.CompressedDSCP<<2 | p.TClass&3
	return p
}

// compressionReport sums the engines of the job's NICs.
func (r *runner) compressionReport() *CompressionReport {
	var s nic.CompressionStats
	seen := map[*nic.NIC]bool{}
	for _, w := range r.workers {
		if seen[w.h] || w.h.Stats.Compression == nil {
			continue
		}
		seen[w.h] = true
		s.Add(w.h.Stats.Compression)
	}
	rep := &CompressionReport{K: r.cfg.Compress, Compressed: s.TxCompressed, Uncompressed: s.TxUncompressed, Classes: s.TxClasses}
	if s.TxWirePayload > 0 {
		rep.PayloadRatio = float64(s.TxPayload) / float64(s.TxWirePayload)
		pkts := s.TxCompressed + s.TxUncompressed
		rep.WireRatio = float64(s.TxRawFrameBytes+pkts*fabric.WireOverhead) / float64(s.TxFrameBytes+pkts*fabric.WireOverhead)
	}
	if m, ok := r.job.(errorMeter); ok {
		rep.MaxAbsErr = m.maxAbsErr()
	}
	return rep
}

// packetTrip is what a message of payload p (packets of mtu bytes from
// its start) is after one trip through the engines: each packet's values
// projected when its packed form is shorter, left as they are when not.
func packetTrip(c *inceptionn.Codec, mtu int, p []byte) {
	for lo := 0; lo < len(p); lo += mtu {
		pkt := p[lo:min(lo+mtu, len(p))]
		if c.PackedLen(pkt) < len(pkt) {
			c.Project(pkt)
		}
	}
}

// maxAbsDiff is the largest |got[i] - want[i]| of two float32 slices
// (little-endian), Inf when one of a pair is NaN and the other not.
func maxAbsDiff(got, want []byte, m float64) float64 {
	for i := 0; i+4 <= len(got); i += 4 {
		g, w := float64(f32At(got, i)), float64(f32At(want, i))
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

func f32At(b []byte, i int) float32 {
	return math.Float32frombits(uint32(b[i]) | uint32(b[i+1])<<8 | uint32(b[i+2])<<16 | uint32(b[i+3])<<24)
}
