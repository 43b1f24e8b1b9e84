// Package replay feeds a capture's frames into an emulated switch offline,
// at their original relative times, and captures what the switch sends:
// the results a NetReduce switch would have computed from the same input,
// with fresh ICRCs. It models one switch (a star's captures, or any
// capture whose stations get ports by first appearance).
package replay

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/inaemu/inaemu/emu/fabric"
	"github.com/inaemu/inaemu/emu/netreduce"
	"github.com/inaemu/inaemu/emu/switching"
	"github.com/inaemu/inaemu/frames"
	"github.com/inaemu/inaemu/frames/wire"
	"github.com/inaemu/inaemu/internal/pcapio"
	"github.com/inaemu/inaemu/tensor"
)

// Options configure feeding a capture through the switch offline.
// Zero ring fields are inferred from the capture's INA headers: Workers
// from the highest rank, MsgLen from the longest message, MTU from the
// largest payload; Window defaults to 2.
type Options struct {
	Workers, Window, MsgLen, MTU int
	DType                        tensor.DType
	Release                      netreduce.Release
	Rate                         float64 // egress link rate (0: 100G)
	Out                          io.Writer
	// SwitchProgram is the program the switch aggregates with: the one
	// the capture's section comment names (pcapio.SwitchProgram), or a
	// flag's ("": netreduce). The output capture names it too.
	SwitchProgram string
}

// Report says what the switch did with a replayed capture.
type Report struct {
	Frames  int `json:"frames"`  // frames fed in
	Ignored int `json:"ignored"` // frames of *-out interfaces (what a switch sent)
	// NotDelivered counts frames the capture marks as dropped by a fault
	// before they reached the switch: they are not fed in.
	NotDelivered int              `json:"not_delivered"`
	Ports        int              `json:"ports"`   // switch ports used
	Ring         string           `json:"ring"`    // the ring configuration used
	Emitted      uint64           `json:"emitted"` // frames the switch sent (see the output capture)
	Switch       switching.Report `json:"switch"`  // its counters
}

// ThroughSwitch feeds the frames of a capture into an emulated
// switch at their original relative times and writes everything it sends
// (results with fresh ICRCs, forwarded frames) to opt.Out as pcapng, on
// interfaces portR-out. Ingress ports: a frame seen on interface "portR-in"
// enters port R and frames on "portR-out" (a switch's own output) are
// skipped; in any other capture each source MAC gets the next port, in
// order of appearance.
func ThroughSwitch(recs []pcapio.Record, ifaceNames []string, opt Options) (*Report, error) {
	rep := &Report{}
	type in struct {
		port int
		at   time.Duration
		data []byte
	}
	var feed []in
	macPort := map[[6]byte]int{}
	ports := 0
	var t0 time.Time // the earliest timestamp: times are relative to it
	for i, r := range recs {
		if i == 0 || r.Info.Timestamp.Before(t0) {
			t0 = r.Info.Timestamp
		}
	}
	var v frames.View
	maxRank, maxLen, maxPay := -1, 0, 0
	for _, r := range recs {
		if len(r.Data) < 14 {
			continue
		}
		if pcapio.IsGhost(r.Comments) { // a fault dropped it: the switch never got it
			rep.NotDelivered++
			continue
		}
		port := -1
		if idx := r.Info.InterfaceIndex; idx < len(ifaceNames) {
			name := ifaceNames[idx]
			var p int
			if _, err := fmt.Sscanf(name, "port%d-", &p); err == nil && strings.HasSuffix(name, "-out") {
				rep.Ignored++
				continue
			} else if err == nil && strings.HasSuffix(name, "-in") {
				port = p
			}
		}
		if port < 0 {
			src := [6]byte(r.Data[6:12])
			p, ok := macPort[src]
			if !ok {
				p = len(macPort)
				macPort[src] = p
			}
			port = p
		}
		ports = max(ports, port+1)
		if v.Parse(r.Data) == nil {
			maxPay = max(maxPay, len(v.Payload()))
			if op := v.Opcode(); (op == wire.WriteFirst || op == wire.WriteOnly || op == wire.WriteOnlyWithImm) && wire.IsINA(v.Payload()) {
				h := v.INA()
				maxRank, maxLen = max(maxRank, int(h.Rank())), max(maxLen, int(h.MsgLen()))
			}
		}
		feed = append(feed, in{port, r.Info.Timestamp.Sub(t0), r.Data})
	}
	if len(feed) == 0 {
		return nil, fmt.Errorf("replay: no frames to feed the switch")
	}
	if opt.Workers == 0 {
		opt.Workers = max(maxRank+1, 2)
	}
	if opt.MsgLen == 0 {
		opt.MsgLen = max(maxLen, 1)
	}
	if opt.Window == 0 {
		opt.Window = 2
	}
	if opt.MTU == 0 {
		opt.MTU = 256
		for opt.MTU < maxPay && opt.MTU < 4096 {
			opt.MTU *= 2
		}
	}
	if opt.Rate == 0 {
		opt.Rate = 100e9
	}
	fab, err := fabric.New(fabric.Config{Hosts: max(ports, 1), Link: fabric.LinkConfig{Rate: opt.Rate}, Capture: opt.Out, LearnMACs: true, SwitchProgram: opt.SwitchProgram})
	if err != nil {
		return nil, err
	}
	if maxRank >= 0 {
		if err := netreduce.AddRing(fab.Switch, opt.SwitchProgram, netreduce.RingConfig{ID: 0, Workers: opt.Workers, Window: opt.Window, MsgLen: opt.MsgLen,
			MTU: opt.MTU, DType: opt.DType, Release: opt.Release}); err != nil {
			return nil, err
		}
		rep.Ring = fmt.Sprintf("workers=%d window=%d msg-len=%d mtu=%d dtype=%s release=%s", opt.Workers, opt.Window, opt.MsgLen, opt.MTU, opt.DType, opt.Release)
	}
	for _, f := range feed {
		f := f
		fab.Clock.AfterFunc(f.at, func() { fab.Switch.Ingress(f.port, f.data) })
	}
	for fab.Clock.Step() {
	}
	if err := fab.CloseCapture(); err != nil {
		return nil, err
	}
	rep.Frames, rep.Ports = len(feed), ports
	rep.Switch = fab.Switch.Report()
	rep.Emitted = fab.LinkStats().Frames
	return rep, nil
}
