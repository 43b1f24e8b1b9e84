package switching

import (
	"fmt"
	"math"
	"math/bits"
	"time"
)

// The contract between the switch's buffer (its memory manager: the
// admission and PFC thresholds of buffer.go) and the ports' MACs (the
// link directions of emu/fabric, which send and honour the pauses). Its
// implementations are buffer.go's (BufferConfig, the thresholds) and
// fabric's link directions (PauseEgress).

// PauseEgress is a port's egress that can send an 802.1Qbb PFC frame
// ahead of its queue (a MAC Control frame is never queued behind data
// nor paused): enable has bit i set for each priority i the frame
// names, quanta[i] is priority i's pause time in units of 512 bit times
// (0: resume at once). A link direction is one; a device is not (a
// switch on devices sends no pauses).
type PauseEgress interface {
	SendPause(enable uint8, quanta [8]uint16)
}

// BufferConfig is the switch's shared buffer and the thresholds its
// memory manager applies (SetBuffer). The zero value is today's
// accounting only: nothing admitted or paused on the counts.
type BufferConfig struct {
	// Bytes is the shared buffer's size (0: DefaultBufferBytes).
	Bytes int64
	// Lossless has bit i set for each priority PFC protects: an ingress
	// (port, priority) over its XOFF threshold pauses the upstream
	// transmitter for that priority; under XON it resumes it. Frames of
	// the other priorities are lossy: admitted against the egress
	// threshold, dropped when it is exceeded.
	Lossless uint8
	// Enforce turns admission on for lossy priorities too (a buffer that
	// drops when full) even with Lossless 0.
	Enforce bool
	// XOFF, if positive, is a static XOFF threshold in bytes per ingress
	// (port, priority); 0 is the dynamic threshold Alpha × (free shared
	// buffer), as commodity switches configure it.
	XOFF int64
	// Alpha is the dynamic threshold's factor (0: the default).
	Alpha float64
	// XONDelta is how far under XOFF an ingress queue must drain before it
	// is resumed (0: the default).
	XONDelta int64
	// Headroom is what each lossless ingress (port, priority) may hold
	// beyond XOFF, for the frames in flight while the pause takes effect
	// (0: computed per port from its link).
	Headroom int64
	// EgressAlpha is the lossy egress queues' dynamic threshold factor
	// (0: the default).
	EgressAlpha float64
	// MaxFrame is the largest frame a port takes, in bytes, for the
	// computed headroom (0: DefaultMaxFrame).
	MaxFrame int64
}

// The defaults of BufferConfig's zero fields, each a commodity switch's
// (docs/congestion.md, "The switch buffer", has the sources).
const (
	// DefaultAlpha is the lossless ingress (port, priority)'s dynamic XOFF
	// factor: SONiC's lossless buffer profiles on Broadcom and Mellanox
	// ASICs set dynamic_th 0, and α = 2^dynamic_th = 1 (sonic-buildimage:
	// pg_profile_lookup.ini's threshold column, buffers_config.j2's
	// default_dynamic_th).
	DefaultAlpha = 1.0
	// DefaultEgressAlpha is the lossy egress queue's factor: SONiC's
	// egress_lossy_profile has dynamic_th 3, α = 2^3 = 8.
	DefaultEgressAlpha = 8.0
	// DefaultXONDelta is how far under XOFF a paused ingress drains before
	// it is resumed: SONiC's xon_offset on Broadcom Tomahawk switches,
	// 2288 bytes (11 cells of 208 bytes; Arista-7060CX-32S
	// pg_profile_lookup.ini).
	DefaultXONDelta = 2288
	// DefaultMaxFrame is a jumbo frame, 9216 bytes, the largest a data
	// centre switch port takes and what headroom calculations assume.
	DefaultMaxFrame = 9216
	// PauseQuanta is what a pause names for each paused priority: the
	// longest pause (0xFFFF × 512 bit times), re-sent before it lapses
	// while the ingress stays over XON, and ended by a quanta-0 resume.
	PauseQuanta = 0xFFFF
)

// PortLink is a switch port's link as its buffer needs it: the rate in
// bits per second and the one-way propagation delay. The zero value is a
// port without a link (a device), which sends no pause.
type PortLink struct {
	Rate float64
	Prop time.Duration
}

// responseQuanta is how long a MAC may take to stop sending after a pause
// arrives, in pause quanta, by speed: IEEE 802.3 Table 31B-1 (the limit
// 802.1Qbb Annex N's headroom model takes as the PFC response delay).
// A rate between two speeds takes the faster one's, the larger delay;
// rates up to 10 Gb/s take 10 Gb/s's.
var responseQuanta = [...]struct {
	rate   float64
	quanta int64
}{{10e9, 60}, {25e9, 80}, {40e9, 118}, {100e9, 394}, {400e9, 905}}

// ResponseDelayBits is the PFC response delay at rate in bit times.
func ResponseDelayBits(rate float64) int64 {
	for _, r := range responseQuanta {
		if rate <= r.rate {
			return r.quanta * 512
		}
	}
	return responseQuanta[len(responseQuanta)-1].quanta * 512
}

// PortHeadroom is what a lossless ingress (port, priority) may hold
// beyond XOFF: Headroom if set, else 802.1Qbb Annex N's worst case for
// the link: what arrives while the pause crosses the link and the last
// frames before it stop (2 × rate × propagation delay), a maximum frame
// the pause waits behind on the switch's egress and one the upstream
// finishes sending (2 × MaxFrame), and the upstream MAC's response delay.
// A port without a link has the two frames only.
func (c BufferConfig) PortHeadroom(l PortLink) int64 {
	if c.Headroom > 0 {
		return c.Headroom
	}
	mf := c.MaxFrame
	if mf == 0 {
		mf = DefaultMaxFrame
	}
	if l.Rate <= 0 {
		return 2 * mf
	}
	wire := 2 * l.Rate * l.Prop.Seconds() / 8
	return int64(math.Ceil(wire)) + 2*mf + (ResponseDelayBits(l.Rate)+7)/8
}

// withDefaults is c with every zero field its default.
func (c BufferConfig) withDefaults() BufferConfig {
	if c.Bytes == 0 {
		c.Bytes = DefaultBufferBytes
	}
	if c.Alpha == 0 {
		c.Alpha = DefaultAlpha
	}
	if c.EgressAlpha == 0 {
		c.EgressAlpha = DefaultEgressAlpha
	}
	if c.XONDelta == 0 {
		c.XONDelta = DefaultXONDelta
	}
	if c.MaxFrame == 0 {
		c.MaxFrame = DefaultMaxFrame
	}
	return c
}

// reserved is the headroom every port's lossless priorities hold back
// from the shared buffer.
func (c BufferConfig) reserved(ports []PortLink) int64 {
	n := int64(bits.OnesCount8(c.Lossless))
	if n == 0 {
		return 0
	}
	var sum int64
	for _, l := range ports {
		sum += c.PortHeadroom(l)
	}
	return n * sum
}

// Validate refuses a configuration no switch could run, for a switch
// whose ports have the links given (one per port, the zero PortLink for a
// port without one), with a one-line error.
func (c BufferConfig) Validate(ports ...PortLink) error {
	bad := func(f string, a ...any) error { return fmt.Errorf("switch buffer: "+f, a...) }
	switch {
	case c.Bytes < 0:
		return bad("size %d B is negative", c.Bytes)
	case c.XOFF < 0:
		return bad("XOFF %d B is negative", c.XOFF)
	case c.XONDelta < 0:
		return bad("XON offset %d B is negative", c.XONDelta)
	case c.Headroom < 0:
		return bad("headroom %d B is negative", c.Headroom)
	case c.MaxFrame < 0:
		return bad("maximum frame %d B is negative", c.MaxFrame)
	case c.Alpha < 0 || math.IsNaN(c.Alpha) || math.IsInf(c.Alpha, 0):
		return bad("alpha %v: want a positive factor", c.Alpha)
	case c.EgressAlpha < 0 || math.IsNaN(c.EgressAlpha) || math.IsInf(c.EgressAlpha, 0):
		return bad("egress alpha %v: want a positive factor", c.EgressAlpha)
	}
	for p, l := range ports {
		if l.Rate < 0 || math.IsNaN(l.Rate) || math.IsInf(l.Rate, 0) || l.Prop < 0 {
			return bad("port %d's link (%v b/s, %v) is not a link", p, l.Rate, l.Prop)
		}
	}
	d := c.withDefaults()
	if c.Lossless == 0 {
		return nil
	}
	if c.XOFF > 0 && d.XONDelta >= c.XOFF {
		return bad("XON offset %d B is not under XOFF %d B: a paused port would never resume", d.XONDelta, c.XOFF)
	}
	var most int64
	for _, l := range ports {
		most = max(most, d.PortHeadroom(l))
	}
	if c.XOFF > 0 && c.XOFF+most > d.Bytes {
		return bad("XOFF %d B + headroom %d B is more than the %d B buffer", c.XOFF, most, d.Bytes)
	}
	if r := d.reserved(ports); r >= d.Bytes {
		return bad("the headroom of %d ports × %d lossless priorities (%d B) leaves nothing of the %d B buffer to share",
			len(ports), bits.OnesCount8(c.Lossless), r, d.Bytes)
	}
	if c.XOFF > 0 && c.XOFF > d.Bytes-d.reserved(ports) {
		return bad("XOFF %d B is more than the %d B shared buffer left beside the headroom", c.XOFF, d.Bytes-d.reserved(ports))
	}
	return nil
}
