package capcheck_test

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/inaemu/inaemu/capcheck"
)

// TestCheckDuplicateKnownAcrossLinks: a NAK a duplicate fault copied on
// the responder's link ("inaemu: fault=duplicate" on both copies there)
// reaches the requester's link with the switch's MAC addresses, the copy
// with a bit flipped in its UDP checksum (a corrupt fault the ICRC does
// not cover, so the host takes it). It is the network's copy of the NAK,
// not a second NAK of the responder: no extra-nak. (The emulator's verbs
// runs under faults drew this.)
func TestCheckDuplicateKnownAcrossLinks(t *testing.T) {
	c := chkNewCapture("resp-link", "req-link")
	a := chkNewConn(t, 1, 2, 0x12, 0x11)
	for p := uint32(100); p <= 103; p++ {
		if p != 101 {
			c.add("req-link", us, a.data(p, false)) // 101 lost after this link
		}
	}
	nak := a.nak(101)
	c.add("resp-link", us, nak, "inaemu: fault=duplicate")
	c.add("resp-link", 0, nak, "inaemu: fault=duplicate")
	onward := append([]byte(nil), nak...)
	copy(onward[6:12], []byte{2, 0, 0, 0, 0, 0xfe}) // the switch's source MAC
	c.add("req-link", us, onward)
	flipped := append([]byte(nil), onward...)
	flipped[14+20+7] ^= 0x08 // the UDP checksum's low byte
	c.add("req-link", us, flipped, "inaemu: fault=corrupt")
	recs, names := chkRecords(t, c)
	rep := capcheck.Check(recs, capcheck.CheckOptions{Interfaces: names})
	assert.Equal(t, []chkWant{}, chkViolations(rep))
	assert.Zero(t, rep.BadICRC, "the UDP checksum is outside the ICRC")
}
