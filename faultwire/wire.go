// Package faultwire is a fault-injecting wire between pairs of Ethernet
// ports: frames one side sends cross to the other through the same fault
// stages as the emulator's links (package faults: netem's impairments and
// deterministic events by port, direction, class, QP, PSN and nth), and a
// pcapng capture shows both sides of every pair, with fault annotations.
//
// Each pair joins a host side (inaemu's hosts, or any RoCE endpoint) and a
// device side (a switch under test): direction "in" runs from host to
// device, "out" back, as on the emulator's star, so port=R dir=in names the
// frames rank R's host sends to device port R. The wire runs on the wall
// clock: a delayed frame leaves when its delay is over, a held one when
// the frames after it have passed or the direction has been idle for
// Config.Idle.
//
// What is faulted is decided by the seed and by the order of RoCE frames
// on each direction, never by timing: the same traffic under the same seed
// meets the same faults. Frames that are not RoCE (the hosts' gratuitous
// ARPs, which repeat on a timer) pass untouched and are not counted, so
// they cannot shift an nth.
package faultwire

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/inaemu/inaemu/faults"
	"github.com/inaemu/inaemu/frames"
	"github.com/inaemu/inaemu/internal/pcapio"
	"github.com/inaemu/inaemu/internal/wallloop"
	"github.com/inaemu/inaemu/roce"
	"github.com/inaemu/inaemu/tap"
)

// Pair is one port's two sides.
type Pair struct {
	Host   tap.Device // where rank Port's host is
	Device tap.Device // the device's port Port
}

// Config sets up a wire.
type Config struct {
	// Pairs[r] joins rank r's host to the device's port r.
	Pairs  []Pair
	Netem  faults.Netem   // random impairments on every direction
	Events []faults.Event // deterministic events, matched by port=R dir=in|out or link=NAME (see LinkName)
	Seed   uint64         // every random choice comes from it
	// Capture, if set, receives a pcapng with four interfaces per pair
	// (see CaptureNames).
	Capture io.Writer
	// DType, if set, is the element type of the NetReduce payloads the
	// device sums, named in the capture's section comment beside the wall
	// clock (pcapio.DTypeComment: nothing for f32) for check's agg-sum.
	DType string
	// Idle is how long a direction must be quiet before the frames its
	// stage holds back are released anyway (0: DefaultIdle).
	Idle time.Duration
}

// DefaultIdle is Config.Idle's default: well above the gaps the
// scheduling of a busy machine puts inside a burst of frames, well below
// any retransmission timeout used on TAPs.
const DefaultIdle = 5 * time.Millisecond

// LinkName is the name a link=NAME event uses for port r's direction:
// "portR-in" (host to device) or "portR-out" (device to host), as on the
// emulator's star.
func LinkName(r int, dir faults.Dir) string {
	if dir == faults.DirIn {
		return fmt.Sprintf("port%d-in", r)
	}
	return fmt.Sprintf("port%d-out", r)
}

func wireLink(name string, pairs int) bool {
	for r := range pairs {
		if name == LinkName(r, faults.DirIn) || name == LinkName(r, faults.DirOut) {
			return true
		}
	}
	return false
}

// CaptureNames are the capture's interfaces for pair r, in order: the
// host side, as the host sent and as it received (hR-wR, wR-hR), and the
// device side, as the device received and as it sent (wR-swR, swR-wR).
// Faults happen inside the wire, so they are annotated where the frames
// come out of it (wR-swR and wR-hR): a dropped frame is written there at
// the time it would have arrived, with a comment saying it was not
// delivered; so is a frame the receiving side's full queue dropped (kind
// QueueKind).
func CaptureNames(r int) [4]string {
	return [4]string{fmt.Sprintf("h%d-w%d", r, r), fmt.Sprintf("w%d-h%d", r, r), fmt.Sprintf("w%d-sw%d", r, r), fmt.Sprintf("sw%d-w%d", r, r)}
}

// DirStats count one direction of one pair.
type DirStats struct {
	Link   string       `json:"link"`
	Frames uint64       `json:"frames"` // RoCE frames read from the sending side
	Bytes  uint64       `json:"bytes"`
	Other  uint64       `json:"other"` // frames that are not RoCE, passed untouched
	Faults faults.Stats `json:"faults"`
	// QueueDrops counts the frames the receiving side's full queue
	// dropped (tap.ErrQueueFull: a host that fell behind), each captured
	// as not delivered (kind QueueKind). No fault of the schedule did it,
	// so Faults does not count them.
	QueueDrops uint64 `json:"queue_drops,omitempty"`
}

// Report is what a wire did.
type Report struct {
	Dirs    []DirStats `json:"dirs"`
	Written uint64     `json:"written"` // frames written out, duplicates and forgeries included
	WallNS  int64      `json:"wall_ns"`
}

// QueueDrops sums every direction's QueueDrops: frames a receiver's full
// queue dropped.
func (r Report) QueueDrops() uint64 {
	var n uint64
	for _, d := range r.Dirs {
		n += d.QueueDrops
	}
	return n
}

// Faults sums every direction's fault counters.
func (r Report) Faults() faults.Stats {
	var s faults.Stats
	for _, d := range r.Dirs {
		s.Add(d.Faults)
	}
	return s
}

// Wire joins the pairs of a Config. Serve runs it.
type Wire struct {
	idle   time.Duration
	loop   *wallloop.Loop
	dirs   []*direction // 2r: pair r in, 2r+1: pair r out
	cap    *pcapio.Writer
	capErr error

	written uint64
}

// QueueKind is the capture annotation's kind for a frame the receiving
// side's full queue dropped: the wire wrote it, the receiver never got
// it. Readers treat it as any frame not delivered (pcapio.IsGhost).
const QueueKind = "queue"

// direction is one way of one pair.
type direction struct {
	w       *Wire
	to      tap.Device
	stage   *faults.Stage
	stats   DirStats
	sentCap int // capture interface: as sent into the wire
	outCap  int // capture interface: as it came out
	flush   roce.Timer
	emitFn  faults.Emit
}

// wireBuffers bounds frames read and not yet handled.
const wireBuffers = 4096

// New builds a wire; its readers start at once, and it moves frames when
// Serve is called.
func New(cfg Config) (*Wire, error) {
	if len(cfg.Pairs) == 0 {
		return nil, errors.New("faultwire: no pairs to join")
	}
	for r, p := range cfg.Pairs {
		if p.Host == nil || p.Device == nil {
			return nil, fmt.Errorf("faultwire: pair %d lacks a side", r)
		}
	}
	for _, e := range cfg.Events {
		if e.Port >= len(cfg.Pairs) {
			return nil, fmt.Errorf("faultwire: %q names port %d; the wire has ports 0..%d", e.Spec, e.Port, len(cfg.Pairs)-1)
		}
		if e.Link != "" && !wireLink(e.Link, len(cfg.Pairs)) {
			return nil, fmt.Errorf("faultwire: %q names link %s; the wire's are port0-in, port0-out .. port%d-out", e.Spec, e.Link, len(cfg.Pairs)-1)
		}
		if e.Action == faults.ActSpoof && (e.From < 0 || e.From >= len(cfg.Pairs)) {
			return nil, fmt.Errorf("faultwire: %q forges from port %d; the wire has ports 0..%d", e.Spec, e.From, len(cfg.Pairs)-1)
		}
	}
	w := &Wire{idle: cfg.Idle, loop: wallloop.New(wireBuffers, tap.MaxFrame, 1)}
	if w.idle <= 0 {
		w.idle = DefaultIdle
	}
	var names []string
	for r, p := range cfg.Pairs {
		n := CaptureNames(r)
		names = append(names, n[:]...)
		base := 4 * r
		for _, dir := range []faults.Dir{faults.DirIn, faults.DirOut} {
			d := &direction{w: w, to: p.Device, sentCap: base, outCap: base + 2}
			if dir == faults.DirOut {
				d.to, d.sentCap, d.outCap = p.Host, base+3, base+1
			}
			d.stats.Link = LinkName(r, dir)
			d.stage = faults.NewLinkStage(d.stats.Link, r, dir, cfg.Netem, cfg.Events, faults.StageSeed(cfg.Seed, r, dir))
			d.stage.Now = w.loop.Clock.Now
			d.stage.OnDrop = d.dropped
			if dir == faults.DirIn {
				d.stage.OnSpoof = w.spoof
			}
			d.emitFn = d.emit
			t := w.loop.Clock.AfterFunc(0, d.idleFlush)
			t.Stop()
			d.flush = t
			w.dirs = append(w.dirs, d)
		}
	}
	if cfg.Capture != nil {
		c, err := pcapio.NewCommentedWriter(cfg.Capture, pcapio.JoinComments(pcapio.WallClockComment, pcapio.DTypeComment(cfg.DType)), names...)
		if err != nil {
			return nil, fmt.Errorf("faultwire: capture: %w", err)
		}
		w.cap = c
	}
	for r, p := range cfg.Pairs {
		w.loop.Add(p.Host, w.dirs[2*r].handle)
		w.loop.Add(p.Device, w.dirs[2*r+1].handle)
	}
	return w, nil
}

// Serve moves frames until ctx ends or a device fails, then stops the
// readers and closes every device; it flushes the capture. A ctx that
// ended is not an error.
func (w *Wire) Serve(ctx context.Context) error {
	err := w.loop.Serve(ctx, func() bool { return false })
	if w.loop.Failed() == nil && errors.Is(err, ctx.Err()) {
		err = nil
	}
	if cerr := w.Close(); err == nil {
		err = cerr
	}
	if w.cap != nil {
		if ferr := w.cap.Flush(); err == nil && w.capErr == nil {
			err = ferr
		}
	}
	if err == nil && w.capErr != nil {
		err = fmt.Errorf("faultwire: capture: %w", w.capErr)
	}
	return err
}

// Close stops the readers and closes every device.
func (w *Wire) Close() error { return w.loop.Close() }

// Report is what the wire did so far (call it after Serve returns).
func (w *Wire) Report() Report {
	rep := Report{Written: w.written, WallNS: int64(w.loop.Now())}
	for _, d := range w.dirs {
		s := d.stats
		s.Faults = d.stage.Stats
		s.Frames = s.Faults.Frames // every RoCE frame goes through the stage
		rep.Dirs = append(rep.Dirs, s)
	}
	return rep
}

// handle takes one frame read from d's sending side.
func (d *direction) handle(frame []byte) {
	w := d.w
	w.record(d.sentCap, frame, annotation{})
	var v frames.View
	if v.Parse(frame) != nil {
		d.stats.Other++
		d.put(frame, annotation{})
		return
	}
	d.stats.Bytes += uint64(len(frame))
	d.stage.Process(frame, d.emitFn)
	if d.stage.Pending() > 0 {
		d.flush.Reset(w.idle)
	}
}

// emit is the stage's output: now, or after the fault's delay.
func (d *direction) emit(frame []byte, delay time.Duration, note faults.Note, ev *faults.Event) {
	a := annotation{note: note, ev: ev, extra: delay + d.stage.HeldFor}
	if delay <= 0 {
		d.put(frame, a)
		return
	}
	b := append([]byte(nil), frame...)
	d.w.loop.Clock.AfterFunc(delay, func() { d.put(b, a) })
}

// dropped records a frame the stage dropped where it would have come out.
func (d *direction) dropped(frame []byte, note faults.Note, ev *faults.Event) {
	d.w.record(d.outCap, frame, annotation{note: note, ev: ev, ghost: true})
}

// idleFlush releases held frames once d has been quiet for Idle.
func (d *direction) idleFlush() { d.stage.Flush(d.emitFn) }

// spoof sends a forged frame into the device by port from.
func (w *Wire) spoof(frame []byte, from int, ev *faults.Event) {
	in := w.dirs[2*from] // port from's direction into the device
	in.put(frame, annotation{note: faults.NoteSpoof, ev: ev})
}

// annotation is a frame's fault comment, formatted only if a capture
// is written.
type annotation struct {
	note  faults.Note // 0: no fault
	ev    *faults.Event
	extra time.Duration
	ghost bool
	queue bool // the receiver's full queue dropped it (QueueKind)
}

// put writes frame out of d's receiving side and records it where it
// came out. A frame the receiver's full queue dropped (a host that fell
// behind: tap.HostPipe) is recorded there too, as not delivered.
//
// The wire never waits on a host: its loop (internal/wallloop) reads every
// side on reader goroutines that take a frame buffer, read and hand the
// frame to the loop, and the loop's only writes are these, to the hosts
// through HostPipe's loop ends, which never wait, and to the device's
// sockets (which wait out a full kernel queue, never a host). So a host
// whose write waits for room in its pipe (HostPipe's host end) waits only
// for this loop to take frames, which it does whatever the host does: the
// wait cannot close a cycle.
func (d *direction) put(frame []byte, a annotation) {
	w := d.w
	if w.loop.Failed() != nil {
		return
	}
	if err := d.to.WriteFrame(frame); err != nil {
		if !errors.Is(err, tap.ErrQueueFull) {
			w.loop.Fail(err)
			return
		}
		d.stats.QueueDrops++
		a.ghost, a.queue = true, true
		w.record(d.outCap, frame, a)
		return
	}
	w.written++
	w.record(d.outCap, frame, a)
}

// record writes frame to capture interface id, with its annotation.
func (w *Wire) record(id int, frame []byte, a annotation) {
	if w.cap == nil || w.capErr != nil {
		return
	}
	ts := time.Now().UnixNano()
	if a.note == 0 && !a.queue {
		w.capErr = w.cap.WriteIndex(id, ts, frame)
		return
	}
	kinds := a.note.String()
	if a.queue {
		if kinds != "" {
			kinds += ","
		}
		kinds += QueueKind
	}
	w.capErr = w.cap.WriteIndex(id, ts, frame, pcapio.FaultComment(kinds, a.ev.SpecText(), a.extra, a.ghost))
}
