package endpoint

import (
	"encoding/binary"
	"time"

	"github.com/inaemu/inaemu/emu/inaps"
	"github.com/inaemu/inaemu/frames/wire"
	"github.com/inaemu/inaemu/internal/clock"
)

// The reliable worker↔PS channel: ESA sends every retransmission to the
// PS "over reliable transport (e.g. TCP)". inaemu carries it as UDP
// datagrams (port ChannelPort) with a 10-byte header, go-back-N with a
// cumulative ACK: lossless and in order whatever the links do, each
// retry counted.
const (
	ChannelPort = 4792
	chanHdr     = 10
	udpOff      = 34
	chanOff     = udpOff + 8
	msgOff      = chanOff + chanHdr
	// ChannelFrameLen is a message frame; an ACK is the minimum frame.
	ChannelFrameLen = msgOff + wire.INAPSLen
	chanAckLen      = 60
)

// Kind is a channel message's kind.
type Kind uint8

const (
	KindGradient  Kind = 1    // worker → PS: a retransmitted gradient
	KindReminder  Kind = 2    // worker → PS: I miss this result
	KindResend    Kind = 3    // PS → worker: resend your gradient
	KindQuery     Kind = 4    // PS → worker: do you hold the result?
	KindAnswer    Kind = 5    // worker → PS: the result I hold
	KindNotHeld   Kind = 6    // worker → PS: I do not hold it
	KindParameter Kind = 7    // PS → worker: a result
	KindACK       Kind = 0x80 // cumulative acknowledgement
)

// channel is one direction pair between a worker and its PS, at one end.
type channel struct {
	clk        clock.Clock
	self, peer inaps.Addr
	out        *outQueue
	kick       func()
	deliver    func(k Kind, h wire.INAPS)
	rto        time.Duration

	next    uint32   // next sequence number to give a message
	unacked [][]byte // given a number and not acknowledged, in order (frame copies)
	flying  int      // how many of unacked are on the wire (the first ones)
	acked   uint32   // all below are acknowledged
	expect  uint32   // next sequence number to deliver
	timer   clock.Timer
	armed   bool
	backoff int

	ahead [chanWindow][]byte // messages received ahead of a gap
	spare [][]byte
	dups  int // duplicate ACKs in a row

	// Stale, if set, says whether a message still waiting to go is no
	// longer wanted (see fill).
	Stale func(k Kind, h wire.INAPS) bool

	Retries uint64 // messages sent again after a timeout
	Sent    uint64
	Dropped uint64 // stale messages never sent
}

func newChannel(clk clock.Clock, self, peer inaps.Addr, out *outQueue, kick func(), rto time.Duration, deliver func(Kind, wire.INAPS)) *channel {
	c := &channel{clk: clk, self: self, peer: peer, out: out, kick: kick, rto: rto, deliver: deliver}
	c.timer = clk.AfterFunc(0, c.onTimeout)
	c.timer.Stop()
	return c
}

// writeUDP writes the Ethernet, IPv4 and UDP headers of a datagram of
// payload bytes.
func writeUDP(f []byte, src, dst inaps.Addr, payload int) {
	copy(f[0:6], dst.MAC[:])
	copy(f[6:12], src.MAC[:])
	f[12], f[13] = 0x08, 0x00
	ip := f[14:34]
	ip[0], ip[1] = 0x45, 0
	binary.BigEndian.PutUint16(ip[2:], uint16(20+8+payload))
	ip[4], ip[5], ip[6], ip[7] = 0, 0, 0x40, 0
	ip[8], ip[9] = 64, 17
	copy(ip[12:16], src.IP[:])
	copy(ip[16:20], dst.IP[:])
	inaps.SetIPChecksum(f)
	u := f[udpOff:chanOff]
	binary.BigEndian.PutUint16(u[0:], ChannelPort)
	binary.BigEndian.PutUint16(u[2:], ChannelPort)
	binary.BigEndian.PutUint16(u[4:], uint16(8+payload))
	u[6], u[7] = 0, 0 // no checksum (IPv4 allows it); the Ethernet FCS guards the bits
}

// Send queues a message of kind k whose INA-PS header fill writes.
func (c *channel) Send(k Kind, fill func(h wire.INAPS)) {
	f := make([]byte, ChannelFrameLen) // the exceptional path: a copy kept until acknowledged
	writeUDP(f, c.self, c.peer, chanHdr+wire.INAPSLen)
	f[chanOff] = byte(k)
	fill(wire.INAPS(f[msgOff:]))
	c.unacked = append(c.unacked, f)
	c.Sent++
	c.fill()
}

// chanWindow is how many messages a channel has on the wire at once, so
// that a burst of them (a PS asking every worker) cannot flood a queue
// and a loss costs one window's resend, not the whole backlog.
const chanWindow = 16

// fill puts messages on the wire up to the window. A message waiting
// behind the window gets its sequence number only as it goes, so one
// that is no longer wanted by then (Stale: a reminder for a result that
// has come meanwhile) is dropped, not sent late.
func (c *channel) fill() {
	for c.flying < len(c.unacked) && c.flying < chanWindow {
		f := c.unacked[c.flying]
		if c.Stale != nil && c.Stale(Kind(f[chanOff]), wire.INAPS(f[msgOff:])) {
			c.unacked = append(c.unacked[:c.flying], c.unacked[c.flying+1:]...)
			c.Dropped++
			continue
		}
		binary.BigEndian.PutUint32(f[chanOff+2:], c.next)
		c.next++
		c.transmit(f)
		c.flying++
	}
	if c.flying > 0 && !c.armed {
		c.armed = true
		c.timer.Reset(c.rto << c.backoff)
	}
}

// transmit queues a copy of message f with the current cumulative ACK.
func (c *channel) transmit(f []byte) {
	b := c.out.get(len(f))
	copy(b, f)
	binary.BigEndian.PutUint32(b[chanOff+6:], c.expect)
	c.out.put(b)
	c.kick()
}

func (c *channel) sendACK() {
	b := c.out.get(chanAckLen)
	clear(b)
	writeUDP(b, c.self, c.peer, chanHdr)
	b[chanOff] = byte(KindACK)
	binary.BigEndian.PutUint32(b[chanOff+2:], c.next)
	binary.BigEndian.PutUint32(b[chanOff+6:], c.expect)
	c.out.put(b)
	c.kick()
}

// onTimeout sends every unacknowledged message again (go-back-N).
func (c *channel) onTimeout() {
	c.armed = false
	if len(c.unacked) == 0 {
		return
	}
	for _, f := range c.unacked[:c.flying] {
		c.transmit(f)
		c.Retries++
	}
	c.backoff = min(c.backoff+1, 6)
	c.armed = true
	c.timer.Reset(c.rto << c.backoff)
}

// IsChannel reports whether f is a channel datagram.
func IsChannel(f []byte) bool {
	return len(f) >= chanOff+chanHdr && f[12] == 0x08 && f[13] == 0x00 && f[14] == 0x45 && f[23] == 17 &&
		binary.BigEndian.Uint16(f[udpOff+2:]) == ChannelPort
}

// receive takes a channel datagram from the peer.
func (c *channel) receive(f []byte) {
	ch := f[chanOff:]
	k, seq, ack := Kind(ch[0]), binary.BigEndian.Uint32(ch[2:]), binary.BigEndian.Uint32(ch[6:])
	if n := int32(ack - c.acked); n > 0 && int(n) <= c.flying {
		clear(c.unacked[:n])
		c.unacked = c.unacked[n:]
		c.flying -= int(n)
		c.acked = ack
		c.backoff, c.dups = 0, 0
		c.timer.Stop()
		c.armed = false
		c.fill()
	} else if n == 0 && c.flying > 0 && k == KindACK {
		// A duplicate ACK: the peer holds later messages and misses the
		// first; the third resends it at once (TCP's fast retransmit).
		if c.dups++; c.dups == 3 {
			c.transmit(c.unacked[0])
			c.Retries++
		}
	}
	if k == KindACK {
		return
	}
	if len(f) < ChannelFrameLen {
		return
	}
	switch d := int32(seq - c.expect); {
	case d == 0:
		c.expect++
		c.deliver(k, wire.INAPS(f[msgOff:ChannelFrameLen]))
		// Messages that came ahead of this one, now in order.
		for {
			i := c.early(c.expect)
			if i < 0 {
				break
			}
			b := c.ahead[i]
			c.ahead[i] = nil
			c.expect++
			c.deliver(Kind(b[chanOff]), wire.INAPS(b[msgOff:ChannelFrameLen]))
			c.spare = append(c.spare, b)
		}
	case d > 0 && d <= chanWindow:
		// Ahead of a gap (reordered, or one before it lost): kept, so the
		// sender resends only the gap.
		if c.early(seq) < 0 {
			var b []byte
			if n := len(c.spare); n > 0 {
				b, c.spare = c.spare[n-1], c.spare[:n-1]
			} else {
				b = make([]byte, ChannelFrameLen)
			}
			copy(b, f[:ChannelFrameLen])
			for i := range c.ahead {
				if c.ahead[i] == nil {
					c.ahead[i] = b
					break
				}
			}
		}
	}
	c.sendACK() // in order or not: tell the sender where we are
}

// early is the index in ahead of the kept message numbered seq (-1:
// none).
func (c *channel) early(seq uint32) int {
	for i, b := range c.ahead {
		if b != nil && binary.BigEndian.Uint32(b[chanOff+2:]) == seq {
			return i
		}
	}
	return -1
}
