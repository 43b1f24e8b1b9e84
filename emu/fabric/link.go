package fabric

import (
	"time"

	"github.com/inaemu/inaemu/faults"
	"github.com/inaemu/inaemu/frames"
	"github.com/inaemu/inaemu/roce"
)

// Ethernet overhead a frame costs on the wire beyond the bytes a capture
// shows: 7 B preamble + 1 B start delimiter, 4 B FCS, 12 B inter-frame gap.
const WireOverhead = 24

// MaxFrame bounds every frame the fabric carries (MTU 4096 plus headers).
const MaxFrame = 4096 + 256

// holdIdle is how long a link direction must stay idle before the frames
// its fault stage holds back (hold=K, reorder) are released anyway: a
// sender waiting for the held frame's ACK would otherwise never send the K
// frames that release it.
const holdIdle = 20 * time.Microsecond

// LinkStats count one link direction.
type LinkStats struct {
	Frames     uint64 `json:"frames"`      // frames serialized
	Bytes      uint64 `json:"bytes"`       // their bytes (without preamble, FCS, gap)
	Delivered  uint64 `json:"delivered"`   // frames handed to the receiver
	QueueDrops uint64 `json:"queue_drops"` // tail drops of a full egress queue
	MaxQueue   int    `json:"max_queue"`   // deepest the egress queue got (frames)
	// FCSDrops are corrupted frames the receiving MAC discarded (see
	// fcsDrop).
	FCSDrops uint64 `json:"fcs_drops,omitempty"`
}

// txSource is a transmitter that is asked for its next frame when the line
// is free (a NIC): it writes the frame into buf and returns its length, or
// 0. A frame may take longer than its line time: TxEnginePs is how long
// the source's compression engine took over the frame NextFrame returned
// last (it streams the frame to the MAC at its own rate), in picoseconds,
// 0 for none.
type txSource interface {
	NextFrame(buf []byte) int
	TxEnginePs() int64
}

type flight struct {
	buf    []byte
	arrive time.Duration
	note   faults.Note
	ev     *faults.Event
	extra  time.Duration // the fault stage's delay beyond the link's own
}

// linkDir is one direction of a full-duplex link: a transmitter that
// serializes frames at the link rate (from a pull source or a bounded
// egress queue), the direction's fault stage, the propagation delay, and
// the receiver at the far end. Everything runs on the fabric's clock.
type linkDir struct {
	fab    *Fabric
	name   string // capture interface name, e.g. "port3-in"
	port   int
	dir    faults.Dir
	bytePs int64 // picoseconds per byte at the link rate
	prop   time.Duration
	stage  *faults.Stage
	capID  int
	recv   func(frame []byte)
	src    txSource
	queue  Queue
	// onDepart, if set, sees each frame leave the egress queue for the
	// line, with the tag it was pushed with (the switch's buffer
	// accounting releases it); frame is valid only during the call.
	onDepart func(tag uint32, frame []byte)
	// rev is the other direction of the link (its transmitter sits at this
	// direction's receiver); mac is this transmitter's MAC; pfc its MAC
	// Control (pfc.go), nil when the fabric has none.
	rev *linkDir
	mac [6]byte
	pfc *pfcState

	Stats LinkStats

	inflight []flight
	head     int // first live entry of inflight
	// ghosts are frames the fault stage dropped, on their way to the
	// capture at their would-be arrival. They have their own list and
	// timer so that capturing never moves a delivery event: a run with
	// --pcap is the run without it.
	ghosts    []flight
	ghostHead int
	pool      [][]byte

	busy        bool
	txBuf       []byte
	txLen       int
	freePs      int64 // when the line is free, in picoseconds
	wakePending bool
	wakeAt      time.Duration

	txTimer, rxTimer, flushTimer, ghostTimer roce.Timer
	emitFn                                   faults.Emit
}

func newLinkDir(f *Fabric, name string, port int, dir faults.Dir, rateBps float64, prop time.Duration, q Queue) *linkDir {
	d := &linkDir{fab: f, name: name, port: port, dir: dir, prop: prop, queue: q, capID: -1,
		bytePs: int64(8e12/rateBps + 0.5), txBuf: make([]byte, MaxFrame)}
	d.txTimer = f.Clock.AfterFunc(0, d.onTx)
	d.txTimer.Stop()
	d.rxTimer = f.Clock.AfterFunc(0, d.onArrive)
	d.rxTimer.Stop()
	d.flushTimer = f.Clock.AfterFunc(0, d.onIdleFlush)
	d.flushTimer.Stop()
	d.ghostTimer = f.Clock.AfterFunc(0, d.onGhost)
	d.ghostTimer.Stop()
	d.emitFn = d.launch
	return d
}

func (d *linkDir) setStage(s *faults.Stage) {
	if s == nil || !s.Active() {
		return
	}
	d.stage = s
	s.OnDrop = d.dropped
	s.Now = d.fab.Clock.Now
}

// WireTime is how long a frame of n bytes occupies the line.
func (d *linkDir) wireTime(n int) int64 { return int64(n+WireOverhead) * d.bytePs }

func (d *linkDir) getBuf() []byte {
	if k := len(d.pool); k > 0 {
		b := d.pool[k-1]
		d.pool = d.pool[:k-1]
		return b
	}
	return make([]byte, MaxFrame)
}

func (d *linkDir) putBuf(b []byte) { d.pool = append(d.pool, b[:cap(b)]) }

// Kick tells a pull-source direction that its source has a frame. It never
// calls the source at once (the source may be in the middle of an update).
func (d *linkDir) Kick() { d.wake(d.fab.Clock.Now()) }

// Push queues a copy of frame for transmission no earlier than ready (the
// switch's processing latency); the queue discipline may refuse it (a
// full drop-tail queue drops it at the tail).
func (d *linkDir) Push(frame []byte, ready time.Duration) bool {
	return d.PushTagged(frame, ready, 0)
}

// PushTagged is Push with a tag that onDepart is given back when the frame
// leaves the queue.
func (d *linkDir) PushTagged(frame []byte, ready time.Duration, tag uint32) bool {
	b := d.getBuf()[:len(frame)]
	copy(b, frame)
	if !d.queue.Enqueue(Packet{Frame: b, Ready: ready, Tag: tag}) {
		d.putBuf(b)
		d.Stats.QueueDrops++
		return false
	}
	d.Stats.MaxQueue = max(d.Stats.MaxQueue, d.queue.Len())
	// Every earlier frame has a wake-up at its own ready time pending (or
	// the line is busy and start runs when it frees), so this frame's own
	// is the only one it may need.
	d.wake(ready)
	return true
}

func (d *linkDir) wake(at time.Duration) {
	if d.busy || (d.wakePending && d.wakeAt <= at) {
		return
	}
	now := d.fab.Clock.Now()
	d.wakePending, d.wakeAt = true, max(at, now)
	d.txTimer.Reset(d.wakeAt - now)
}

func (d *linkDir) onTx() {
	if d.busy {
		d.busy = false
		d.finish()
	} else {
		d.wakePending = false
	}
	d.start()
}

// start serializes the next frame, if there is one and the line is free.
func (d *linkDir) start() {
	if d.busy {
		return
	}
	now := d.fab.Clock.Now()
	n, pulled := 0, false
	if d.pfc != nil && d.pfc.pending {
		n = d.takePause() // MAC Control goes first and is never paused
	} else if p, next, ok := d.queue.Dequeue(now); ok {
		n = copy(d.txBuf, p.Frame)
		if d.onDepart != nil {
			d.onDepart(p.Tag, p.Frame)
		}
		d.putBuf(p.Frame)
	} else if next != Never {
		d.wake(next)
		return
	} else if d.src != nil {
		n, pulled = d.src.NextFrame(d.txBuf), true
	}
	if n == 0 {
		if d.stage != nil && d.stage.Pending() > 0 {
			d.flushTimer.Reset(holdIdle)
		}
		return
	}
	d.flushTimer.Stop()
	nowPs := int64(now) * 1000
	startPs := max(nowPs, d.freePs)
	if nowPs-d.freePs < 1000 {
		// Back to back: the line freed less than a nanosecond ago (timers
		// tick in ns); start exactly then so rounding never accumulates.
		startPs = d.freePs
	}
	occ := d.wireTime(n)
	if pulled {
		occ = max(occ, d.src.TxEnginePs())
	}
	d.freePs = startPs + occ
	// The transmit timer now marks the frame's end: a wake-up the source
	// asked for while it was being pulled (a Kick from inside NextFrame)
	// is superseded, and must not stay pending, or every later Kick would
	// think one is scheduled and the line would never be asked again.
	d.busy, d.txLen, d.wakePending = true, n, false
	d.txTimer.Reset(time.Duration((d.freePs+999)/1000) - now)
}

// finish: the last bit is on the wire; the fault stage decides what
// reaches the far end.
func (d *linkDir) finish() {
	frame := d.txBuf[:d.txLen]
	d.Stats.Frames++
	d.Stats.Bytes += uint64(d.txLen)
	if d.fab.onSend != nil {
		d.fab.onSend(d.port, d.dir, d.fab.Clock.Now(), frame)
	}
	if d.stage != nil {
		d.stage.Process(frame, d.emitFn)
	} else {
		d.launch(frame, 0, 0, nil)
	}
}

// launch puts a copy of frame in flight towards the receiver.
func (d *linkDir) launch(frame []byte, delay time.Duration, note faults.Note, ev *faults.Event) {
	extra := delay
	if d.stage != nil {
		extra += d.stage.HeldFor
	}
	d.fly(frame, delay, extra, note, ev)
}

// fly puts frame on the wire to arrive after the link's delay plus delay;
// extra is what the capture records as the fault's delay (held time
// included).
func (d *linkDir) fly(frame []byte, delay, extra time.Duration, note faults.Note, ev *faults.Event) {
	b := d.getBuf()[:len(frame)]
	copy(b, frame)
	at := d.fab.Clock.Now() + d.prop + delay
	if d.head > 0 && d.head == len(d.inflight) {
		d.inflight, d.head = d.inflight[:0], 0
	}
	i := len(d.inflight)
	d.inflight = append(d.inflight, flight{})
	for i > d.head && d.inflight[i-1].arrive > at {
		d.inflight[i] = d.inflight[i-1]
		i--
	}
	d.inflight[i] = flight{buf: b, arrive: at, note: note, ev: ev, extra: extra}
	if i == d.head {
		d.rxTimer.Reset(at - d.fab.Clock.Now())
	}
}

// inject delivers a forgery (a spoof event's) at the far end after the
// propagation delay, on a timer of its own rather than through inflight:
// queued there it would re-arm rxTimer, and so move the link's next real
// delivery behind another link's delivery due at the same instant. A
// forgery entering by a host's port would then reorder that host's own
// frames at the switch, and one tenant's timing would depend on frames
// forged of another. Forgeries are rare one-shot events; the closure is
// no hot-path allocation.
func (d *linkDir) inject(frame []byte, note faults.Note, ev *faults.Event) {
	b := d.getBuf()[:len(frame)]
	copy(b, frame)
	d.fab.Clock.AfterFunc(d.prop, func() {
		if d.fab.capture != nil {
			d.fab.capture.record(d, d.fab.Clock.Now(), b, note, ev, 0, false)
		}
		d.Stats.Delivered++
		d.recv(b)
		d.putBuf(b)
	})
}

// onArrive delivers every frame due now, in order.
func (d *linkDir) onArrive() {
	now := d.fab.Clock.Now()
	for d.head < len(d.inflight) && d.inflight[d.head].arrive <= now {
		f := d.inflight[d.head]
		d.inflight[d.head] = flight{}
		d.head++
		// A corrupted MAC Control frame fails its FCS too.
		if f.note&faults.NoteCorrupt != 0 && (fcsDrop(f.buf) || d.pfc != nil && frames.IsMACControl(f.buf)) {
			d.Stats.FCSDrops++
			if d.fab.capture != nil {
				d.fab.capture.record(d, now, f.buf, f.note, f.ev, f.extra, true)
			}
			d.putBuf(f.buf)
			continue
		}
		if d.fab.capture != nil {
			d.fab.capture.record(d, now, f.buf, f.note, f.ev, f.extra, false)
		}
		if d.pfc != nil && frames.IsMACControl(f.buf) {
			d.macControl(f.buf, now) // the receiving MAC's: never handed up
			d.putBuf(f.buf)
			continue
		}
		d.Stats.Delivered++
		d.recv(f.buf)
		d.putBuf(f.buf)
	}
	if d.head < len(d.inflight) {
		d.rxTimer.Reset(d.inflight[d.head].arrive - now)
	}
	if d.head > 64 && d.head*2 > len(d.inflight) {
		n := copy(d.inflight, d.inflight[d.head:])
		clear(d.inflight[n:])
		d.inflight, d.head = d.inflight[:n], 0
	}
}

// dropped sends the ghost of a frame the fault stage dropped down the
// wire, so the capture shows it where the receiver would have seen it.
// Drops happen in time order and the delay is the link's, so the list
// stays sorted by arrival.
func (d *linkDir) dropped(frame []byte, note faults.Note, ev *faults.Event) {
	if d.fab.capture == nil {
		return
	}
	b := d.getBuf()[:len(frame)]
	copy(b, frame)
	now := d.fab.Clock.Now()
	if d.ghostHead > 0 && d.ghostHead == len(d.ghosts) {
		d.ghosts, d.ghostHead = d.ghosts[:0], 0
	}
	d.ghosts = append(d.ghosts, flight{buf: b, arrive: now + d.prop, note: note, ev: ev})
	if len(d.ghosts)-d.ghostHead == 1 {
		d.ghostTimer.Reset(d.prop)
	}
}

// onGhost writes every ghost due now to the capture.
func (d *linkDir) onGhost() {
	now := d.fab.Clock.Now()
	for d.ghostHead < len(d.ghosts) && d.ghosts[d.ghostHead].arrive <= now {
		g := d.ghosts[d.ghostHead]
		d.ghosts[d.ghostHead] = flight{}
		d.ghostHead++
		d.fab.capture.record(d, now, g.buf, g.note, g.ev, 0, true)
		d.putBuf(g.buf)
	}
	if d.ghostHead < len(d.ghosts) {
		d.ghostTimer.Reset(d.ghosts[d.ghostHead].arrive - now)
	}
}

func (d *linkDir) onIdleFlush() {
	if !d.busy && d.stage != nil {
		d.stage.Flush(d.emitFn)
	}
}

// fcsDrop reports whether the receiving MAC discards a frame the fault
// stage corrupted: an INA-PS frame (EtherType 0x0700) or its UDP channel
// carries no end-to-end check of its own (ATP, ESA and SwitchML define
// none), so the bit error a corrupt fault models on it is the one the
// Ethernet FCS catches at the next MAC. A RoCE frame's corruption is
// delivered: it models the error that escapes the FCS (inside a switch),
// which the ICRC is there to catch.
func fcsDrop(f []byte) bool {
	if len(f) < 14 {
		return false
	}
	if f[12] == 0x07 && f[13] == 0x00 {
		return true
	}
	// IPv4/UDP to the INA-PS channel's port 4792 (no options: IHL 5).
	return len(f) >= 38 && f[12] == 0x08 && f[13] == 0x00 && f[14] == 0x45 && f[23] == 17 && f[36] == 0x12 && f[37] == 0xB8
}
