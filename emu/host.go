package emu

import (
	"fmt"
	"net"
	"net/netip"

	"github.com/inaemu/inaemu/emu/topo"
	"github.com/inaemu/inaemu/frames"
	"github.com/inaemu/inaemu/roce"
)

// HostStats count what a host's NIC received and did not hand to a QP.
type HostStats struct {
	RxFrames  uint64 `json:"rx_frames"`
	NotForMe  uint64 `json:"not_for_me"` // unicast to another MAC (the switch flooded it)
	NotRoCE   uint64 `json:"not_roce"`   // ARP and other frames, ignored
	NoQP      uint64 `json:"no_qp"`      // RoCE frames for a QPN the host does not have
	CtrlSent  uint64 `json:"ctrl_sent"`  // frames sent that are not RoCE (gratuitous ARP)
	RoCESent  uint64 `json:"roce_sent"`  // frames the QPs sent
	Malformed uint64 `json:"malformed"`  // RoCE-looking frames the parser rejected
}

// Host is one RoCE NIC of a host node: host h3's first NIC is the Host
// named "h3", its second "h3:nic1" (a host's i-th link is its NIC i). Its
// QPs are served round-robin whenever the line is free (the NIC pulls
// frames, so a host never queues more than it can send).
type Host struct {
	Name      string // "h3", "h3:nic1"
	Node      string // the host node's name
	Index     int    // the host node's index (h3: 3); the addresses derive from it
	NIC       int    // which of the node's NICs
	MAC       net.HardwareAddr
	IP        netip.Addr // the IPv4/IPv6 address, or the RoCEv1 GID
	Transport frames.Transport
	PD        *roce.PD
	Stats     HostStats
	// OnCompletion, if set, runs (as its own event) after any of the
	// host's CQs gained completions.
	OnCompletion func()

	// OnControl, if set, sees every frame that is not RoCE (ARP...).
	OnControl func(frame []byte)

	fab       *Fabric
	up        kicker // the NIC's transmit side: a link direction or a device
	link      string // the link direction it transmits on
	live      bool   // the NIC is a device in this process
	qps       []*roce.QP
	rr        int
	ctrl      [][]byte
	view      frames.View
	pollTimer roce.Timer
	pollDue   bool
	mac6      [6]byte
}

// kicker is a transmitter that pulls frames from a txSource when told it
// has some.
type kicker interface{ kick() }

func newHost(f *Fabric, node *topo.Node, nic int, t frames.Transport) *Host {
	r := node.Index
	h := &Host{Name: node.Name, Node: node.Name, Index: r, NIC: nic, MAC: NICMAC(r, nic), IP: nicAddr(t, r, nic), Transport: t, PD: roce.NewPD(), fab: f}
	if nic > 0 {
		h.Name = fmt.Sprintf("%s:nic%d", node.Name, nic)
	}
	copy(h.mac6[:], h.MAC)
	tm := f.Clock.AfterFunc(0, h.poll)
	tm.Stop()
	h.pollTimer = tm
	return h
}

// NewQP creates a QP on this host whose completions wake OnCompletion.
func (h *Host) NewQP(qpn uint32) *roce.QP {
	scq, rcq := roce.NewCQ(64), roce.NewCQ(64)
	scq.Notify, rcq.Notify = h.completed, h.completed
	q := roce.NewQP(qpn, h.fab.Clock, h.PD, scq, rcq)
	q.OnTxReady = h.up.kick
	h.qps = append(h.qps, q)
	return q
}

// QPs are the host's queue pairs, in creation order.
func (h *Host) QPs() []*roce.QP { return h.qps }

// PathTo is the path from this host to peer's QP dqpn.
func (h *Host) PathTo(peer *Host, dqpn uint32) frames.Path {
	return frames.Path{Transport: h.Transport, SrcMAC: h.MAC, DstMAC: peer.MAC, SrcIP: h.IP, DstIP: peer.IP, DestQP: dqpn}
}

// SendControl queues a non-RoCE frame (sent before any QP traffic).
func (h *Host) SendControl(frame []byte) {
	h.ctrl = append(h.ctrl, append([]byte(nil), frame...))
	h.up.kick()
}

// GratuitousARP is the ARP announcement a host sends when its link comes
// up, so the switch learns its port before the first RoCE frame.
func (h *Host) GratuitousARP() []byte {
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

func (h *Host) completed() {
	if !h.pollDue && h.OnCompletion != nil {
		h.pollDue = true
		h.pollTimer.Reset(0)
	}
}

func (h *Host) poll() {
	h.pollDue = false
	h.OnCompletion()
}

// nextFrame is the NIC's transmit arbiter: control frames, then the QPs
// round-robin.
func (h *Host) nextFrame(buf []byte) int {
	if len(h.ctrl) > 0 {
		n := copy(buf, h.ctrl[0])
		h.ctrl = h.ctrl[1:]
		h.Stats.CtrlSent++
		return n
	}
	for i := range h.qps {
		q := h.qps[(h.rr+i)%len(h.qps)]
		if !q.HasFrame() {
			continue
		}
		if n, ok := q.NextFrame(buf); ok {
			h.rr = (h.rr + i + 1) % len(h.qps)
			h.Stats.RoCESent++
			return n
		}
	}
	return 0
}

// receive is the NIC's receive path: MAC filter, parse, demultiplex by QPN.
func (h *Host) receive(frame []byte) {
	h.Stats.RxFrames++
	if len(frame) < 14 {
		h.Stats.Malformed++
		return
	}
	if frame[0]&1 == 0 && [6]byte(frame[0:6]) != h.mac6 {
		h.Stats.NotForMe++
		return
	}
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
	qpn := h.view.DestQP()
	for _, q := range h.qps {
		if q.QPN() == qpn {
			q.Receive(&h.view)
			return
		}
	}
	h.Stats.NoQP++
}
