package capcheck_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

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

// TestCheckDuplicateWithShortVLANFrame: once a frame carries a duplicate
// fault's comment every frame's packet is looked up among the duplicated
// ones; frames of 16 and 17 bytes whose EtherType says a VLAN tag follows
// (nothing, or one byte, after the tag) are read as they are, without a
// panic, and checked as not RoCE.
func TestCheckDuplicateWithShortVLANFrame(t *testing.T) {
	c := chkNewCapture("tap0")
	a := chkNewConn(t, 1, 2, 0x12, 0x11)
	c.add("tap0", us, a.data(100, true), "inaemu: fault=duplicate")
	c.add("tap0", 0, a.data(100, true), "inaemu: fault=duplicate")
	for _, n := range []int{16, 17} {
		short := make([]byte, n)
		copy(short, []byte{2, 0, 0, 0, 0, 1, 2, 0, 0, 0, 0, 2, 0x81, 0x00, 0, 5, 0x08})
		c.add("tap0", us, short)
	}
	c.add("tap0", us, a.ack(100))
	path := filepath.Join(t.TempDir(), "c.pcapng")
	require.NoError(t, os.WriteFile(path, c.pcapng(t), 0o644))
	rep, err := capcheck.CheckFile(path, capcheck.CheckOptions{})
	require.NoError(t, err)
	assert.Equal(t, 5, rep.Frames)
	assert.Equal(t, 3, rep.RoCEFrames)
	assert.Equal(t, []chkWant{}, chkViolations(rep))
}
