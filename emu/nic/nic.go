// Package nic is an emulated RoCE NIC: the queue pairs of a host's RDMA
// device (package roce) behind one Ethernet port. It pulls frames from its
// QPs when its transmitter (a link direction or a TAP device) is free,
// and demultiplexes received frames to QPs by destination QPN. It knows
// nothing of links, switches or jobs.
package nic

import (
	"net"
	"net/netip"
	"time"

	"github.com/inaemu/inaemu/emu/topo"
	"github.com/inaemu/inaemu/frames"
	"github.com/inaemu/inaemu/frames/inceptionn"
	"github.com/inaemu/inaemu/roce"
)

// Stats count what a NIC received and did not hand to a QP.
type Stats struct {
	RxFrames  uint64 `json:"rx_frames"`
	NotForMe  uint64 `json:"not_for_me"`         // unicast to another MAC (the switch flooded it)
	NotRoCE   uint64 `json:"not_roce"`           // ARP and other frames, ignored
	NoQP      uint64 `json:"no_qp"`              // RoCE frames for a QPN the host does not have
	CtrlSent  uint64 `json:"ctrl_sent"`          // frames sent that are not RoCE (gratuitous ARP)
	RoCESent  uint64 `json:"roce_sent"`          // frames the QPs sent
	Malformed uint64 `json:"malformed"`          // RoCE-looking frames the parser rejected
	RawSent   uint64 `json:"raw_sent,omitempty"` // frames the raw source sent (INA-PS)
	// Compression counts the compression offload's work (nil: the NIC has
	// none; emu/nic/compress fills it).
	Compression *CompressionStats `json:"compression,omitempty"`
	// The receive buffer's (SetRxBuffer; rxbuffer.go): frames dropped for
	// want of room (NVIDIA's rx_discards_phy), the PFC frames it sent
	// (pauses on crossing XOFF, their refreshes, resumes at XON), its
	// high-water mark and how long it kept the link partner paused
	// (closed pauses; StatsNow adds one still on), every priority summed.
	RxBufferDrops    uint64 `json:"rx_buffer_drops,omitempty"`
	RxPausesXOFF     uint64 `json:"rx_pauses_xoff,omitempty"`
	RxPausesRefresh  uint64 `json:"rx_pauses_refresh,omitempty"`
	RxPausesXON      uint64 `json:"rx_pauses_xon,omitempty"`
	RxBufferMaxBytes int64  `json:"rx_buffer_max_bytes,omitempty"`
	RxPausedNs       int64  `json:"rx_paused_ns,omitempty"`
}

// CompressionStats count what a NIC's compression engines did (the
// offload is emu/nic/compress; its counters are part of the NIC's report).
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

// NIC is one RoCE NIC of a host: host h3's first NIC is named "h3", its
// second "h3:nic1" (in a topology a host's i-th link is its NIC i). Its
// QPs are served round-robin whenever the line is free (the NIC pulls
// frames, so a host never queues more than it can send).
type NIC struct {
	Name      string // "h3", "h3:nic1"
	Host      string // the host's name
	HostIndex int    // the host's index (h3: 3); the addresses derive from it
	Port      int    // which of the host's NICs
	MAC       net.HardwareAddr
	IP        netip.Addr // the IPv4/IPv6 address, or the RoCEv1 GID
	Transport frames.Transport
	PD        *roce.PD
	Stats     Stats
	// OnCompletion, if set, runs (as its own event) after any of the
	// host's CQs gained completions.
	OnCompletion func()

	// OnControl, if set, sees every frame that is not RoCE (ARP...).
	OnControl func(frame []byte)

	// Live marks a NIC that is a device in this process (the TAP backend).
	Live bool

	clock     roce.Clock
	up        Transmitter
	qps       []*roce.QP
	rr        int
	ctrl      [][]byte
	view      frames.View
	pollTimer roce.Timer
	pollDue   bool
	mac6      [6]byte
	offloads  []Offload
	rxNext    []func(*frames.View) // each offload's next receiver (see AddOffload)
	txPs      int64                // the offloads' engine time of the frame NextFrame returned last
	paceTimer roce.Timer           // asks the transmitter again when the offloads let a QP send
	raw       RawSource
	offTx     []RawSource // offloads' own frames (AddTxSource)
	// PFC (Pause): each priority's pause end, and whether any pause was
	// ever received (until then NextFrame looks at no priority).
	paused  [8]time.Duration
	pausing bool
	// Priority, if set, is a frame's priority (the fabric sets
	// switching.Priority): a control frame of a paused priority waits.
	// Without it control frames ignore pauses.
	Priority func(frame []byte) int
	// rx is the receive buffer (rxbuffer.go), nil: frames go to the QPs
	// as they arrive.
	rx *rxBuffer
}

// Pause holds the NIC's frames of priority prio until until: the PFC
// frame its MAC received (802.1Qbb) names prio. NextFrame then skips the
// QPs of that priority (their path's traffic class >> 5, as the switch
// classifies their frames) and a control frame of it at the head of the
// control queue, and asks the transmitter again when the pause ends. A
// time at or before now resumes at once. Frames of offloads' own sources
// and the raw source are not held (they are written only when pulled).
func (h *NIC) Pause(prio int, until time.Duration) {
	if prio < 0 || prio >= len(h.paused) {
		return
	}
	h.paused[prio], h.pausing = until, true
	if until <= h.clock.Now() && h.up != nil {
		h.up.Kick()
	}
}

// pausedUntil is when a frame of priority prio may go, if later than now.
func (h *NIC) pausedUntil(prio int) (time.Duration, bool) {
	at := h.paused[prio&7]
	return at, at > h.clock.Now()
}

// RawSource is a host's own transport beside RoCE (an INA-PS endpoint):
// the NIC pulls its frames when the line is free, after control frames
// and before the QPs, so a host never queues more than it can send. It
// writes a frame into buf and returns its length, or 0 for none.
type RawSource interface{ NextFrame(buf []byte) int }

// SetRawSource gives the NIC a raw source; frames that are not RoCE it
// receives go to OnControl.
func (h *NIC) SetRawSource(s RawSource) { h.raw = s }

// AddTxSource gives the NIC a source of an offload's own frames (DCQCN's
// congestion notifications), pulled when the line is free after the
// control frames and before the raw source and the QPs, without a copy:
// the source writes its frame into the transmitter's buffer. It tells
// the NIC it has one with Kick.
func (h *NIC) AddTxSource(s RawSource) { h.offTx = append(h.offTx, s) }

// Kick tells the transmitter the NIC has a frame (a raw source's).
func (h *NIC) Kick() { h.up.Kick() }

// Transmitter is a NIC's transmit side (a link direction, a device): it
// pulls frames with NextFrame when the line is free, and Kick tells it
// the NIC has some. Kick must never call NextFrame at once (the NIC may be
// in the middle of an update).
type Transmitter interface{ Kick() }

// MAC is the address of host h's NIC p: the locally administered
// 02:1a:e0:p:(h+1)>>8:(h+1).
func MAC(h, p int) net.HardwareAddr {
	return net.HardwareAddr{0x02, 0x1A, 0xE0, byte(p), byte((h + 1) >> 8), byte(h + 1)}
}

// HostOfMAC is the host and NIC port MAC gave a MAC (ok false for a MAC
// MAC never gives): what a frame's source says about its sender.
func HostOfMAC(mac []byte) (h, p int, ok bool) {
	if len(mac) != 6 || mac[0] != 0x02 || mac[1] != 0x1A || mac[2] != 0xE0 {
		return 0, 0, false
	}
	h = (int(mac[4])<<8 | int(mac[5])) - 1
	return h, int(mac[3]), h >= 0
}

// Addr is host h's NIC p's address for transport t: 10.p.(h+1)>>8.(h+1),
// fd00::(h+1) with p in byte 13, or for RoCEv1 the link-local GID the MAC
// gives (EUI-64), as rxe derives it.
func Addr(t frames.Transport, h, p int) netip.Addr {
	switch t {
	case frames.V2IPv6:
		return netip.AddrFrom16([16]byte{0: 0xfd, 13: byte(p), 15: byte(h + 1), 14: byte((h + 1) >> 8)})
	case frames.V1:
		m := MAC(h, p)
		return netip.AddrFrom16([16]byte{0: 0xfe, 1: 0x80, 8: m[0] ^ 2, 9: m[1], 10: m[2], 11: 0xff, 12: 0xfe, 13: m[3], 14: m[4], 15: m[5]})
	}
	return netip.AddrFrom4([4]byte{10, byte(p), byte((h + 1) >> 8), byte(h + 1)})
}

// New makes port p of host (index h) on the clock, with the addresses MAC
// and Addr give.
func New(clock roce.Clock, host string, h, p int, t frames.Transport) *NIC {
	n := &NIC{Name: topo.NICName(host, p), Host: host, HostIndex: h, Port: p, MAC: MAC(h, p), IP: Addr(t, h, p), Transport: t, PD: roce.NewPD(), clock: clock}
	copy(n.mac6[:], n.MAC)
	tm := clock.AfterFunc(0, n.poll)
	tm.Stop()
	n.pollTimer = tm
	return n
}

// Attach gives the NIC its transmit side (before any QP is made).
func (h *NIC) Attach(tx Transmitter) { h.up = tx }

// NewCQ makes a completion queue whose completions wake OnCompletion, as
// the NIC's QPs' do (for work that completes beside the NIC: a copy over
// the host's GPU interconnect).
func (h *NIC) NewCQ() *roce.CQ {
	cq := roce.NewCQ(64)
	cq.Notify = h.completed
	return cq
}

// NewQP creates a QP on this NIC whose completions wake OnCompletion.
func (h *NIC) NewQP(qpn uint32) *roce.QP {
	scq, rcq := roce.NewCQ(64), roce.NewCQ(64)
	scq.Notify, rcq.Notify = h.completed, h.completed
	q := roce.NewQP(qpn, h.clock, h.PD, scq, rcq)
	q.OnTxReady = h.up.Kick
	h.qps = append(h.qps, q)
	return q
}

// QPs are the host's queue pairs, in creation order.
func (h *NIC) QPs() []*roce.QP { return h.qps }

// PathTo is the path from this host to peer's QP dqpn.
func (h *NIC) PathTo(peer *NIC, dqpn uint32) frames.Path {
	return frames.Path{Transport: h.Transport, SrcMAC: h.MAC, DstMAC: peer.MAC, SrcIP: h.IP, DstIP: peer.IP, DestQP: dqpn}
}

// SendControl queues a non-RoCE frame (sent before any QP traffic).
func (h *NIC) SendControl(frame []byte) {
	h.ctrl = append(h.ctrl, append([]byte(nil), frame...))
	h.up.Kick()
}

// GratuitousARP is the ARP announcement a NIC sends when its link comes
// up, so the switch learns its port before the first RoCE frame.
func (h *NIC) GratuitousARP() []byte {
	f := make([]byte, 60)
	copy(f[0:6], []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff})
	copy(f[6:12], h.MAC)
	f[12], f[13] = 0x08, 0x06
	copy(f[14:22], []byte{0, 1, 8, 0, 6, 4, 0, 1}) // Ethernet, IPv4, request
	copy(f[22:28], h.MAC)
	ip := h.IP
	if !ip.Is4() { // IPv6/RoCEv1 hosts still announce their MAC; the address field is zero
		ip = netip.AddrFrom4([4]byte{})
	}
	a := ip.As4()
	copy(f[28:32], a[:])
	copy(f[38:42], a[:])
	return f
}

func (h *NIC) completed() {
	if !h.pollDue && h.OnCompletion != nil {
		h.pollDue = true
		h.pollTimer.Reset(0)
	}
}

func (h *NIC) poll() {
	h.pollDue = false
	h.OnCompletion()
}

// NextFrame is the NIC's transmit arbiter: control frames, then the QPs
// round-robin. It writes the frame into buf and returns its length, or 0.
func (h *NIC) NextFrame(buf []byte) int {
	h.txPs = 0
	held, heldAt := false, time.Duration(0)
	if len(h.ctrl) > 0 && h.pausing && h.Priority != nil {
		if at, wait := h.pausedUntil(h.Priority(h.ctrl[0])); wait {
			held, heldAt = true, at
		}
	}
	if len(h.ctrl) > 0 && !held {
		n := copy(buf, h.ctrl[0])
		h.ctrl = h.ctrl[1:]
		h.Stats.CtrlSent++
		return n
	}
	for _, s := range h.offTx {
		if n := s.NextFrame(buf); n > 0 {
			return n
		}
	}
	if h.raw != nil {
		if n := h.raw.NextFrame(buf); n > 0 {
			h.Stats.RawSent++
			return n
		}
	}
	for i := range h.qps {
		q := h.qps[(h.rr+i)%len(h.qps)]
		if !q.HasFrame() {
			continue
		}
		if h.pausing {
			if at, wait := h.pausedUntil(int(q.Path().TClass >> 5)); wait {
				if !held || at < heldAt {
					held, heldAt = true, at
				}
				continue
			}
		}
		if at, wait := h.paced(q); wait {
			if !held || at < heldAt {
				held, heldAt = true, at
			}
			continue
		}
		if n, ok := q.NextFrame(buf); ok {
			h.rr = (h.rr + i + 1) % len(h.qps)
			h.Stats.RoCESent++
			for _, o := range h.offloads {
				var ps int64
				n, ps = o.Transmit(q, buf, n)
				h.txPs = max(h.txPs, ps)
			}
			return n
		}
	}
	if held {
		h.wakeAt(heldAt)
	}
	return 0
}

// Receive is the NIC's receive path: MAC filter, the receive buffer if
// it has one, parse, demultiplex by QPN. frame is only read during the
// call.
func (h *NIC) Receive(frame []byte) {
	h.Stats.RxFrames++
	if len(frame) < 14 {
		h.Stats.Malformed++
		return
	}
	if frame[0]&1 == 0 && [6]byte(frame[0:6]) != h.mac6 {
		h.Stats.NotForMe++
		return
	}
	if h.rx != nil {
		h.rx.push(frame)
		return
	}
	h.accept(frame)
}

// accept parses a frame the MAC accepted and hands it on: to the
// offloads and the QPs, or to OnControl.
func (h *NIC) accept(frame []byte) {
	if err := h.view.Parse(frame); err != nil {
		if err == frames.ErrNotRoCE {
			h.Stats.NotRoCE++
			if h.OnControl != nil {
				h.OnControl(frame)
			}
		} else {
			h.Stats.Malformed++
		}
		return
	}
	if len(h.offloads) > 0 {
		h.offloads[0].Receive(&h.view, h.rxNext[0])
		return
	}
	h.deliver(&h.view)
}

// deliver hands a parsed RoCE frame to the QP it is for.
func (h *NIC) deliver(v *frames.View) {
	qpn := v.DestQP()
	for _, q := range h.qps {
		if q.QPN() == qpn {
			q.Receive(v)
			return
		}
	}
	h.Stats.NoQP++
}
