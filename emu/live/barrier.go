package live

import (
	"fmt"
	"time"

	"github.com/inaemu/inaemu/emu/job"
	"github.com/inaemu/inaemu/emu/nic"
	"github.com/inaemu/inaemu/roce"
)

// announceEvery is how often a live host repeats its gratuitous ARP while
// it has not yet heard every peer.
const announceEvery = 10 * time.Millisecond

// StartBarrier makes the processes of a job (a host each, the switch) wait
// for one another, so no rank sends to a device nobody has opened yet
// (job.Devices). Each local host broadcasts a gratuitous ARP request
// every announceEvery until it has heard one from every other rank (the
// switch floods them, so hearing a peer also means the switch runs), and
// answers every request it hears with a gratuitous ARP reply, which is
// never answered: a host that started late hears those who were waiting.
// When every local host has heard every peer, start runs.
func (d *Devices) StartBarrier(clock roce.Clock, hosts []*nic.NIC, start func(), waiting func() bool) job.StartBarrier {
	b := &startBarrier{hosts: hosts, start: start, heard: map[int][]bool{}, left: map[int]int{}}
	n := len(hosts)
	for rank, h := range hosts {
		if h == nil {
			continue
		}
		b.heard[rank] = make([]bool, n)
		b.heard[rank][rank] = true
		b.left[rank] = n - 1
		h.OnControl = func(frame []byte) { b.control(rank, h, frame) }
	}
	b.tick = func() {
		if !waiting() {
			return
		}
		for rank, h := range hosts {
			if h != nil && b.left[rank] > 0 {
				h.SendControl(h.GratuitousARP())
			}
		}
		clock.AfterFunc(announceEvery, b.tick)
	}
	b.tick()
	b.maybeStart()
	return b
}

type startBarrier struct {
	hosts   []*nic.NIC     // by rank; nil: the rank runs in another process
	start   func()         // the job's start, once
	started bool           // start has run
	heard   map[int][]bool // local rank → which ranks it has heard
	left    map[int]int    // local rank → how many it has not
	tick    func()
}

// control handles a non-RoCE frame at local rank's host h.
func (b *startBarrier) control(rank int, h *nic.NIC, frame []byte) {
	peer, op, ok := hostARP(frame)
	if !ok || peer == rank || peer >= len(b.hosts) {
		return
	}
	if !b.heard[rank][peer] {
		b.heard[rank][peer] = true
		b.left[rank]--
		b.maybeStart()
	}
	// A host still waiting announces itself every announceEvery anyway;
	// one that has heard everybody answers the requester alone, so a
	// late rank hears it without a storm of broadcasts.
	if op == arpOpRequest && b.left[rank] == 0 {
		h.SendControl(arpReply(h.GratuitousARP(), frame[6:12]))
	}
}

func (b *startBarrier) maybeStart() {
	if b.started {
		return
	}
	for _, k := range b.left {
		if k > 0 {
			return
		}
	}
	b.started = true
	b.start()
}

// Missing says which local ranks have not heard which peers.
func (b *startBarrier) Missing() string {
	s := ""
	for rank, h := range b.hosts {
		if h == nil {
			continue
		}
		var not []int
		for p, ok := range b.heard[rank] {
			if !ok {
				not = append(not, p)
			}
		}
		if len(not) > 0 {
			s += fmt.Sprintf(" rank %d has not heard ranks %v;", rank, not)
		}
	}
	return "no gratuitous ARP arrived through the switch (is `inaemu switch` running, and every `inaemu host`?):" + s
}

const (
	arpOpRequest = 1
	arpOpReply   = 2
)

// hostARP reads an ARP frame from one of inaemu's hosts: the sender's rank
// (from its MAC, see nic.MAC) and the ARP operation.
func hostARP(f []byte) (rank int, op int, ok bool) {
	if len(f) < 42 || f[12] != 0x08 || f[13] != 0x06 {
		return 0, 0, false
	}
	rank, port, ok := nic.HostOfMAC(f[6:12])
	if !ok || port != 0 {
		return 0, 0, false
	}
	return rank, int(f[20])<<8 | int(f[21]), true
}

// arpReply turns a gratuitous ARP request into a reply to the host with
// MAC to.
func arpReply(f []byte, to []byte) []byte {
	copy(f[0:6], to)
	f[20], f[21] = 0, arpOpReply
	copy(f[32:38], to)
	return f
}
