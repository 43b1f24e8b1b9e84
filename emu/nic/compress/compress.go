// Package compress is INCEPTIONN's in-NIC gradient compression (MICRO
// '18 §VI) as a NIC offload (nic.Offload): a transmit engine that packs
// the payload of every packet its QP marked, a receive engine that
// unpacks them, store-and-forward, in order.
package compress

import (
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/inaemu/inaemu/emu/nic"
	"github.com/inaemu/inaemu/frames"
	"github.com/inaemu/inaemu/frames/inceptionn"
	"github.com/inaemu/inaemu/roce"
)

// Config configures a NIC's compression engines, INCEPTIONN's
// (MICRO '18 §VI) pair between the packet DMA and the MAC: the transmit
// engine compresses the payload of every WRITE or SEND packet its QP
// marked (frames.CompressedDSCP in the QP's traffic class, the RoCE
// counterpart of the paper's per-socket ToS 0x28), the receive engine
// decompresses every marked packet that arrives, and everything else
// passes both untouched. The QPs never see a compressed byte: a packet's
// count, PSN, RETH length and placement are those without compression;
// only its frame shrinks.
type Config struct {
	Codec inceptionn.Codec
	// Rate is each engine's rate in bits per second of uncompressed
	// payload; 0 means the paper's 256 bits per 100 MHz cycle, 25.6 Gb/s.
	Rate float64
	// Latency is the transmit engine's fixed time per packet, added to
	// its cycles (the engine, and so the line, is busy for it; the paper
	// gives none; 0 by default).
	Latency time.Duration
}

// DefaultRate is 256 bits per cycle at 100 MHz (§VI-A, §VII-C).
const DefaultRate = 25.6e9

// engineBits is what an engine takes per cycle: one 256-bit burst.
const engineBits = 256

// engine is a NIC's pair of compression engines.
type engine struct {
	clock   roce.Clock
	codec   inceptionn.Codec
	cyclePs float64 // one 256-bit cycle, picoseconds
	latPs   int64
	stats   nic.CompressionStats

	view   frames.View
	out    []byte // a compressed frame before it replaces the QP's
	packed []byte // a packed payload

	// The receive engine works store-and-forward: a marked packet is
	// decompressed once the whole of it has arrived, one at a time,
	// ceil(L/32) cycles each; the packets wait in order, and packets that
	// pass the engine by wait behind them. (The queue is not bounded: the
	// senders' windows bound it.)
	rxView   frames.View
	rxPay    []byte
	rxQ      []rxPacket
	rxHead   int
	rxPool   [][]byte
	rxFreePs int64
	rxTimer  roce.Timer
	next     func(*frames.View) // the receive side's next stage (nic.Offload.Receive)
}

type rxPacket struct {
	frame []byte
	at    time.Duration
}

// Enable gives NIC h compression engines (before traffic), counted in
// h.Stats.Compression.
func Enable(h *nic.NIC, c Config) error {
	rate := c.Rate
	if rate == 0 {
		rate = DefaultRate
	}
	if !(rate > 0) || math.IsInf(rate, 0) {
		return fmt.Errorf("compression engine rate %g bit/s: want a positive rate", rate)
	}
	if c.Latency < 0 {
		return errors.New("compression engine latency is negative")
	}
	e := &engine{clock: h.Clock(), codec: c.Codec, cyclePs: engineBits * 1e12 / rate, latPs: int64(c.Latency) * 1000,
		out: make([]byte, nic.MaxFrame), packed: make([]byte, 0, nic.MaxFrame)}
	e.rxTimer = e.clock.AfterFunc(0, e.rxEngineDone)
	e.rxTimer.Stop()
	h.AddOffload(e)
	h.Stats.Compression = &e.stats
	return nil
}

// Name is the offload's.
func (e *engine) Name() string { return "compression" }

// Pace never holds a QP back: the transmit engine's time is the frame's
// (Transmit's).
func (e *engine) Pace(*roce.QP, time.Duration) time.Duration { return 0 }

// cycles is the engine time of n payload bytes, picoseconds.
func (e *engine) cycles(n int) int64 {
	return int64(math.Ceil(float64((n*8+engineBits-1)/engineBits) * e.cyclePs))
}

// Transmit runs a frame of a QP that asks for compression (its traffic
// class carries frames.CompressedDSCP) through the transmit engine and
// returns its new length and the engine's time over it; other frames pass
// the engine by.
func (e *engine) Transmit(q *roce.QP, buf []byte, n int) (int, int64) {
	if q.Path().TClass>>2 != frames.CompressedDSCP {
		return n, 0
	}
	v := &e.view
	if v.Parse(buf[:n]) != nil || !v.Compressed() {
		return n, 0
	}
	pay := len(v.Payload())
	ps := e.latPs + e.cycles(pay)
	e.stats.TxPayload += uint64(pay)
	e.stats.TxRawFrameBytes += uint64(n)
	cn, packed, ok, err := frames.Compress(e.out, v, e.codec, e.packed, &e.stats.TxClasses)
	e.packed = packed
	if err != nil || !ok {
		v.SetDSCP(0)
		e.stats.TxUncompressed++
		e.stats.TxWirePayload += uint64(pay)
		e.stats.TxFrameBytes += uint64(n)
		return n, ps
	}
	e.stats.TxCompressed++
	e.stats.TxWirePayload += uint64(len(packed))
	e.stats.TxFrameBytes += uint64(cn)
	return copy(buf, e.out[:cn]), ps
}

// Receive takes a received RoCE frame (parsed in v) through the receive
// side: a marked frame with a good ICRC into the engine; any other frame
// past it, but behind the frames the engine still holds, so that a
// connection's packets reach its QP in the order they arrived (a packet
// sent uncompressed must not overtake the compressed one before it). A
// marked frame with a bad ICRC is not decompressed: the QP sees it as it
// came, and counts it.
func (e *engine) Receive(v *frames.View, next func(*frames.View)) {
	e.next = next
	if !v.Compressed() || !v.ICRCOK() {
		if e.rxHead == len(e.rxQ) {
			next(v)
			return
		}
		b := e.buffer()
		e.queue(b[:copy(b, v.Frame())], e.rxQ[len(e.rxQ)-1].at)
		return
	}
	b := e.buffer()
	n, pay, err := frames.Decompress(b, v, e.rxPay)
	e.rxPay = pay
	if err != nil {
		e.stats.RxUndecodable++
		e.rxPool = append(e.rxPool, b)
		return
	}
	e.stats.RxDecompressed++
	nowPs := int64(e.clock.Now()) * 1000
	e.rxFreePs = max(e.rxFreePs, nowPs) + e.cycles(len(pay))
	e.queue(b[:n], time.Duration((e.rxFreePs+999)/1000))
}

// buffer is a frame buffer from the pool.
func (e *engine) buffer() []byte {
	if k := len(e.rxPool); k > 0 {
		b := e.rxPool[k-1]
		e.rxPool = e.rxPool[:k-1]
		return b
	}
	return make([]byte, nic.MaxFrame)
}

// queue holds frame for the QPs until at.
func (e *engine) queue(frame []byte, at time.Duration) {
	if e.rxHead > 0 && e.rxHead == len(e.rxQ) {
		e.rxQ, e.rxHead = e.rxQ[:0], 0
	}
	e.rxQ = append(e.rxQ, rxPacket{frame: frame, at: at})
	if len(e.rxQ)-e.rxHead == 1 {
		e.rxTimer.Reset(at - e.clock.Now())
	}
}

// rxEngineDone hands the next stage (the QPs) every packet the receive
// engine has finished.
func (e *engine) rxEngineDone() {
	now := e.clock.Now()
	for e.rxHead < len(e.rxQ) && e.rxQ[e.rxHead].at <= now {
		p := e.rxQ[e.rxHead]
		e.rxQ[e.rxHead] = rxPacket{}
		e.rxHead++
		if e.rxView.Parse(p.frame) == nil {
			e.next(&e.rxView)
		}
		e.rxPool = append(e.rxPool, p.frame[:cap(p.frame)])
	}
	if e.rxHead < len(e.rxQ) {
		e.rxTimer.Reset(e.rxQ[e.rxHead].at - now)
	}
}
