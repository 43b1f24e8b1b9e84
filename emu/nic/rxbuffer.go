package nic

import (
	"fmt"
	"math"
	"math/bits"
	"time"

	"github.com/inaemu/inaemu/roce"
)

// The NIC's receive buffer: a slow receiver (issue 36). A real NIC's MAC
// writes every frame it accepts into an on-chip port buffer, from which
// the NIC moves it to host memory over PCIe; when the host side is slower
// than the wire (a narrow or busy PCIe link, memory bandwidth, a stalled
// host) the buffer fills, and the NIC either pauses its link partner for
// the lossless priorities (802.1Qbb PFC: NVIDIA's tx_prio<p>_pause
// counter) or drops what does not fit (rx_discards_phy, "received packets
// dropped due to lack of buffers on a physical port"): the pause-storm
// source of Guo et al., "RDMA over Commodity Ethernet at Scale", SIGCOMM
// '16, §4.
//
// Without SetRxBuffer a NIC hands every frame to its QPs at once, as it
// always did (one nil check per frame). With it:
//
//	MAC accepts frame ─► admitted? ──no──► rx_buffer_drops
//	                         │yes
//	                         ▼
//	      FIFO [ f5 f4 f3 f2 f1 ] ─drain at Rate─► parse, offloads, QPs
//	       bytes per priority ──► XOFF: pause (0xFFFF quanta) on the uplink,
//	                              re-sent at half its time while over XON,
//	                              resumed (quanta 0) at XON
//
// A frame holds its bytes from its arrival until its last byte has
// drained (Rate bits per second of frame bytes, one frame after another:
// the DMA engine's throughput to host memory, its overheads folded in).

// PauseSender is the NIC's link transmitter as far as PFC goes: it sends a
// PFC frame ahead of the NIC's own (a fabric link direction implements it,
// as switching.PauseEgress). enable has bit i for each priority named,
// quanta[i] its pause time in 512 bit times (0: resume).
type PauseSender interface {
	SendPause(enable uint8, quanta [8]uint16)
}

// RxBuffer configures a NIC's receive buffer (SetRxBuffer).
type RxBuffer struct {
	// Rate is how fast the host drains the buffer, in bits of frame per
	// second (> 0).
	Rate float64
	// Bytes is the buffer's size (0: DefaultRxBufferBytes).
	Bytes int64
	// Pause, if set, is the uplink the NIC sends its pauses on; Lossless
	// has bit i for each priority it pauses (both needed for PFC; else
	// the buffer drops what does not fit, whatever the priority).
	Pause    PauseSender
	Lossless uint8
	// Headroom is what each lossless priority may hold beyond XOFF while
	// its pause crosses the link (0: two maximum frames; the fabric passes
	// the switch buffer's 802.1Qbb headroom for the NIC's link).
	Headroom int64
	// XOFF, if positive, is the static XOFF threshold of each lossless
	// priority's bytes; 0: the buffer's share per lossless priority less
	// Headroom (mlx5's update_xoff_threshold: xoff = size − headroom).
	XOFF int64
	// XONDelta is how far under XOFF a paused priority drains before it is
	// resumed (0: MaxFrame, mlx5's xon = xoff − max_mtu).
	XONDelta int64
	// LinkRate is the NIC's link rate (bits per second): a pause of 0xFFFF
	// quanta lasts 0xFFFF × 512 bit times of it, and is re-sent at half
	// that while still over XON (0: never re-sent).
	LinkRate float64
}

// DefaultRxBufferBytes is a ConnectX-4/5 port's receive buffer, 262016
// bytes: "Port buffer size = 262016" in NVIDIA's "HowTo Tune Receive
// Buffers on Mellanox Adapter Cards" (/sys/class/net/IF/qos/buffer_size,
// MLNX_OFED 4.2+), modelled as one FIFO.
const DefaultRxBufferBytes = 262016

// RxPauseQuanta is what the NIC's pause names: the longest pause, re-sent
// before it lapses and ended by a resume, as the switches' are.
const RxPauseQuanta = 0xFFFF

// rxFrame is one frame in the receive buffer.
type rxFrame struct {
	buf  []byte // a pooled buffer; the frame is buf[:n]
	n    int
	prio uint8
}

// rxBuffer is a NIC's receive buffer and its PFC state.
type rxBuffer struct {
	h          *NIC
	cfg        RxBuffer // with defaults
	lossless   uint8    // the priorities it pauses (0 without Pause)
	xoff, xon  int64
	lossyLimit int64 // what lossy frames may fill: Bytes less the lossless headroom
	psPerByte  int64
	half       time.Duration // half a pause, the refresh period (0: none)
	q          []rxFrame
	head       int
	pool       [][]byte
	bytes      int64
	prio       [8]int64
	busy       bool
	donePs     int64 // when the frame draining now is done, picoseconds
	timer      roce.Timer
	paused     [8]bool
	since      [8]time.Duration
	refresh    [8]roce.Timer
}

// SetRxBuffer gives the NIC a receive buffer drained at cfg.Rate (before
// traffic). It refuses a configuration no NIC could run, in one line.
func (h *NIC) SetRxBuffer(cfg RxBuffer) error {
	if cfg.Bytes == 0 {
		cfg.Bytes = DefaultRxBufferBytes
	}
	if cfg.XONDelta == 0 {
		cfg.XONDelta = MaxFrame
	}
	if cfg.Headroom == 0 {
		cfg.Headroom = 2 * MaxFrame
	}
	bad := func(f string, a ...any) error { return fmt.Errorf("NIC receive buffer: "+f, a...) }
	switch {
	case !(cfg.Rate > 0) || math.IsInf(cfg.Rate, 0):
		return bad("drain rate %v b/s: want a rate greater than 0", cfg.Rate)
	case cfg.Bytes < 2*MaxFrame:
		return bad("%d B: want at least two maximum frames (%d B)", cfg.Bytes, 2*MaxFrame)
	case cfg.XOFF < 0 || cfg.XONDelta < 0 || cfg.Headroom < 0:
		return bad("negative XOFF, XON offset or headroom")
	case cfg.LinkRate < 0 || math.IsNaN(cfg.LinkRate) || math.IsInf(cfg.LinkRate, 0):
		return bad("link rate %v b/s is not a rate", cfg.LinkRate)
	}
	b := &rxBuffer{h: h, psPerByte: int64(8e12/cfg.Rate + 0.5)}
	if b.psPerByte < 1 {
		return bad("drain rate %v b/s: want at most 8 Tb/s", cfg.Rate)
	}
	if cfg.Pause != nil {
		b.lossless = cfg.Lossless
	}
	b.lossyLimit = cfg.Bytes
	if k := int64(bits.OnesCount8(b.lossless)); k > 0 {
		b.xoff = cfg.XOFF
		if b.xoff == 0 {
			b.xoff = cfg.Bytes/k - cfg.Headroom
		}
		b.xon = b.xoff - cfg.XONDelta
		if b.xon <= 0 || b.xoff+cfg.Headroom > cfg.Bytes {
			return bad("%d B cannot hold XOFF %d B, its %d B headroom and an XON above 0 for %d lossless priorities", cfg.Bytes, b.xoff, cfg.Headroom, k)
		}
		b.lossyLimit = cfg.Bytes - k*cfg.Headroom
		if cfg.LinkRate > 0 {
			b.half = time.Duration(float64(RxPauseQuanta) * 512 / cfg.LinkRate * 1e9 / 2)
		}
	}
	b.cfg = cfg
	b.timer = h.clock.AfterFunc(0, b.drained)
	b.timer.Stop()
	for p := range b.refresh {
		if b.lossless&(1<<p) != 0 && b.half > 0 {
			b.refresh[p] = h.clock.AfterFunc(0, func() { b.refreshed(p) })
			b.refresh[p].Stop()
		}
	}
	h.rx = b
	return nil
}

// RxBufferThresholds are the XOFF and XON thresholds of each lossless
// priority's bytes (0, 0 without PFC or a buffer).
func (h *NIC) RxBufferThresholds() (xoff, xon int64) {
	if h.rx == nil || h.rx.lossless == 0 {
		return 0, 0
	}
	return h.rx.xoff, h.rx.xon
}

// push takes a frame the MAC accepted: admitted to the FIFO, or dropped.
func (b *rxBuffer) push(frame []byte) {
	h := b.h
	prio := 0
	if h.Priority != nil {
		prio = h.Priority(frame) & 7
	}
	n := int64(len(frame))
	limit := b.lossyLimit
	lossless := b.lossless&(1<<prio) != 0
	if lossless {
		limit = b.cfg.Bytes
	}
	if b.bytes+n > limit {
		h.Stats.RxBufferDrops++
		return
	}
	var buf []byte
	if k := len(b.pool); k > 0 {
		buf, b.pool = b.pool[k-1], b.pool[:k-1]
	}
	if cap(buf) < len(frame) {
		buf = make([]byte, max(len(frame), MaxFrame))
	}
	copy(buf, frame)
	if b.head > 0 && b.head == len(b.q) {
		b.q, b.head = b.q[:0], 0
	}
	b.q = append(b.q, rxFrame{buf: buf, n: len(frame), prio: uint8(prio)})
	b.bytes += n
	b.prio[prio] += n
	h.Stats.RxBufferMaxBytes = max(h.Stats.RxBufferMaxBytes, b.bytes)
	if lossless && !b.paused[prio] && b.prio[prio] > b.xoff {
		b.pause(prio)
	}
	if !b.busy {
		b.start(int64(h.clock.Now()) * 1000)
	}
}

// start drains the head frame from startPs on.
func (b *rxBuffer) start(startPs int64) {
	b.busy = true
	b.donePs = startPs + int64(b.q[b.head].n)*b.psPerByte
	now := b.h.clock.Now()
	b.timer.Reset(time.Duration((b.donePs+999)/1000) - now)
}

// drained: the head frame is in host memory; it goes on to the QPs and
// the next frame starts, back to back.
func (b *rxBuffer) drained() {
	f := b.q[b.head]
	b.q[b.head] = rxFrame{}
	b.head++
	b.busy = false
	if b.head < len(b.q) {
		b.start(b.donePs)
	}
	if b.head > 64 && b.head*2 > len(b.q) {
		n := copy(b.q, b.q[b.head:])
		clear(b.q[n:])
		b.q, b.head = b.q[:n], 0
	}
	n := int64(f.n)
	b.bytes -= n
	b.prio[f.prio] -= n
	if b.paused[f.prio] && b.prio[f.prio] <= b.xon {
		b.resume(int(f.prio))
	}
	b.h.accept(f.buf[:f.n])
	b.pool = append(b.pool, f.buf)
}

// pause sends priority p's XOFF and arms its refresh.
func (b *rxBuffer) pause(p int) {
	b.paused[p], b.since[p] = true, b.h.clock.Now()
	b.h.Stats.RxPausesXOFF++
	b.send(p, RxPauseQuanta)
	if b.refresh[p] != nil {
		b.refresh[p].Reset(b.half)
	}
}

// refreshed re-sends priority p's pause before it lapses.
func (b *rxBuffer) refreshed(p int) {
	if !b.paused[p] {
		return
	}
	b.h.Stats.RxPausesRefresh++
	b.send(p, RxPauseQuanta)
	b.refresh[p].Reset(b.half)
}

// resume ends priority p's pause with a quanta-0 PFC frame.
func (b *rxBuffer) resume(p int) {
	now := b.h.clock.Now()
	b.paused[p] = false
	b.h.Stats.RxPausesXON++
	b.h.Stats.RxPausedNs += int64(now - b.since[p])
	if b.refresh[p] != nil {
		b.refresh[p].Stop()
	}
	b.send(p, 0)
}

func (b *rxBuffer) send(p int, quanta uint16) {
	var q [8]uint16
	q[p] = quanta
	b.cfg.Pause.SendPause(1<<p, q)
}

// StatsNow are the NIC's counters with RxPausedNs up to now (a pause
// still on counts until now; Stats has closed pauses only).
func (h *NIC) StatsNow() Stats {
	s := h.Stats
	if b := h.rx; b != nil {
		now := h.clock.Now()
		for p, on := range b.paused {
			if on {
				s.RxPausedNs += int64(now - b.since[p])
			}
		}
	}
	return s
}
