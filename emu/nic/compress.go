package nic

import (
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/inaemu/inaemu/frames"
	"github.com/inaemu/inaemu/frames/inceptionn"
	"github.com/inaemu/inaemu/roce"
)

// Compression configures a NIC's compression engines, INCEPTIONN's
// (MICRO '18 §VI) pair between the packet DMA and the MAC: the transmit
// engine compresses the payload of every WRITE or SEND packet its QP
// marked (frames.CompressedDSCP in the QP's traffic class, the RoCE
// counterpart of the paper's per-socket ToS 0x28), the receive engine
// decompresses every marked packet that arrives, and everything else
// passes both untouched. The QPs never see a compressed byte: a packet's
// count, PSN, RETH length and placement are those without compression;
// only its frame shrinks.
type Compression struct {
	Codec inceptionn.Codec
	// Rate is each engine's rate in bits per second of uncompressed
	// payload; 0 means the paper's 256 bits per 100 MHz cycle, 25.6 Gb/s.
	Rate float64
	// Latency is the transmit engine's fixed time per packet, added to
	// its cycles (the engine, and so the line, is busy for it; the paper
	// gives none; 0 by default).
	Latency time.Duration
}

// DefaultCompressionRate is 256 bits per cycle at 100 MHz (§VI-A, §VII-C).
const DefaultCompressionRate = 25.6e9

// engineBits is what an engine takes per cycle: one 256-bit burst.
const engineBits = 256

// CompressionStats count what a NIC's engines did.
type CompressionStats struct {
	TxCompressed uint64 `json:"tx_compressed"` // marked packets sent compressed
	// TxUncompressed are marked packets sent as they were, unmarked:
	// packed, their payload would not have been shorter.
	TxUncompressed uint64               `json:"tx_uncompressed"`
	TxPayload      uint64               `json:"tx_payload_bytes"`      // uncompressed payload bytes through the transmit engine
	TxWirePayload  uint64               `json:"tx_wire_payload_bytes"` // the payload bytes those packets carried on the wire
	TxClasses      inceptionn.Histogram `json:"tx_classes"`            // values per class: 0, 8, 16, 32 bits
	// TxRawFrameBytes and TxFrameBytes are those packets' frames as the
	// QPs wrote them and as they were sent (Ethernet padding included).
	TxRawFrameBytes uint64 `json:"tx_raw_frame_bytes"`
	TxFrameBytes    uint64 `json:"tx_frame_bytes"`
	RxDecompressed  uint64 `json:"rx_decompressed"` // marked packets decompressed
	// RxUndecodable are marked packets with a valid ICRC whose payload is
	// not a packed payload: dropped like a corrupt packet (go-back-N
	// recovers them).
	RxUndecodable uint64 `json:"rx_undecodable"`
}

// Add counts o's work in s too.
func (s *CompressionStats) Add(o *CompressionStats) {
	s.TxCompressed += o.TxCompressed
	s.TxUncompressed += o.TxUncompressed
	s.TxPayload += o.TxPayload
	s.TxWirePayload += o.TxWirePayload
	s.TxClasses.Add(o.TxClasses)
	s.TxRawFrameBytes += o.TxRawFrameBytes
	s.TxFrameBytes += o.TxFrameBytes
	s.RxDecompressed += o.RxDecompressed
	s.RxUndecodable += o.RxUndecodable
}

// engine is a NIC's pair of compression engines.
type engine struct {
	codec   inceptionn.Codec
	cyclePs float64 // one 256-bit cycle, picoseconds
	latPs   int64
	stats   CompressionStats

	view   frames.View
	out    []byte // a compressed frame before it replaces the QP's
	packed []byte // a packed payload
	txPs   int64  // engine time of the frame NextFrame returned last

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
}

type rxPacket struct {
	frame []byte
	at    time.Duration
}

// EnableCompression gives the NIC compression engines (before traffic).
func (h *NIC) EnableCompression(c Compression) error {
	rate := c.Rate
	if rate == 0 {
		rate = DefaultCompressionRate
	}
	if !(rate > 0) || math.IsInf(rate, 0) {
		return fmt.Errorf("compression engine rate %g bit/s: want a positive rate", rate)
	}
	if c.Latency < 0 {
		return errors.New("compression engine latency is negative")
	}
	e := &engine{codec: c.Codec, cyclePs: engineBits * 1e12 / rate, latPs: int64(c.Latency) * 1000,
		out: make([]byte, maxFrame), packed: make([]byte, 0, maxFrame)}
	e.rxTimer = h.clock.AfterFunc(0, h.rxEngineDone)
	e.rxTimer.Stop()
	h.comp = e
	h.Stats.Compression = &e.stats
	return nil
}

// maxFrame bounds a frame the engines handle (MTU 4096 and headers).
const maxFrame = 4096 + 256

// cycles is the engine time of n payload bytes, picoseconds.
func (e *engine) cycles(n int) int64 {
	return int64(math.Ceil(float64((n*8+engineBits-1)/engineBits) * e.cyclePs))
}

// TxEnginePs is how long the transmit engine took over the frame
// NextFrame returned last, in picoseconds (0 when it passed the engine
// by): the frame cannot finish on the line sooner, since the engine
// streams it to the MAC.
func (h *NIC) TxEnginePs() int64 {
	if h.comp == nil {
		return 0
	}
	return h.comp.txPs
}

// transmit runs the frame the QPs wrote into buf through the transmit
// engine and returns its new length (NextFrame has reset txPs).
func (e *engine) transmit(buf []byte, n int) int {
	v := &e.view
	if v.Parse(buf[:n]) != nil || !v.Compressed() {
		return n
	}
	pay := len(v.Payload())
	e.txPs = e.latPs + e.cycles(pay)
	e.stats.TxPayload += uint64(pay)
	e.stats.TxRawFrameBytes += uint64(n)
	cn, packed, ok, err := frames.Compress(e.out, v, e.codec, e.packed, &e.stats.TxClasses)
	e.packed = packed
	if err != nil || !ok {
		v.SetDSCP(0)
		e.stats.TxUncompressed++
		e.stats.TxWirePayload += uint64(pay)
		e.stats.TxFrameBytes += uint64(n)
		return n
	}
	e.stats.TxCompressed++
	e.stats.TxWirePayload += uint64(len(packed))
	e.stats.TxFrameBytes += uint64(cn)
	return copy(buf, e.out[:cn])
}

// receive takes a received RoCE frame (parsed in v) through the receive
// side: a marked frame with a good ICRC into the engine; any other frame
// past it, but behind the frames the engine still holds, so that a
// connection's packets reach its QP in the order they arrived (a packet
// sent uncompressed must not overtake the compressed one before it). A
// marked frame with a bad ICRC is not decompressed: the QP sees it as it
// came, and counts it.
func (e *engine) receive(h *NIC, v *frames.View) {
	if !v.Compressed() || !v.ICRCOK() {
		if e.rxHead == len(e.rxQ) {
			h.deliver(v)
			return
		}
		b := e.buffer()
		e.queue(h, b[:copy(b, v.Frame())], e.rxQ[len(e.rxQ)-1].at)
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
	nowPs := int64(h.clock.Now()) * 1000
	e.rxFreePs = max(e.rxFreePs, nowPs) + e.cycles(len(pay))
	e.queue(h, b[:n], time.Duration((e.rxFreePs+999)/1000))
}

// buffer is a frame buffer from the pool.
func (e *engine) buffer() []byte {
	if k := len(e.rxPool); k > 0 {
		b := e.rxPool[k-1]
		e.rxPool = e.rxPool[:k-1]
		return b
	}
	return make([]byte, maxFrame)
}

// queue holds frame for the QPs until at.
func (e *engine) queue(h *NIC, frame []byte, at time.Duration) {
	if e.rxHead > 0 && e.rxHead == len(e.rxQ) {
		e.rxQ, e.rxHead = e.rxQ[:0], 0
	}
	e.rxQ = append(e.rxQ, rxPacket{frame: frame, at: at})
	if len(e.rxQ)-e.rxHead == 1 {
		e.rxTimer.Reset(at - h.clock.Now())
	}
}

// rxEngineDone hands the QPs every packet the receive engine has
// finished.
func (h *NIC) rxEngineDone() {
	e := h.comp
	now := h.clock.Now()
	for e.rxHead < len(e.rxQ) && e.rxQ[e.rxHead].at <= now {
		p := e.rxQ[e.rxHead]
		e.rxQ[e.rxHead] = rxPacket{}
		e.rxHead++
		if e.rxView.Parse(p.frame) == nil {
			h.deliver(&e.rxView)
		}
		e.rxPool = append(e.rxPool, p.frame[:cap(p.frame)])
	}
	if e.rxHead < len(e.rxQ) {
		e.rxTimer.Reset(e.rxQ[e.rxHead].at - now)
	}
}
