package fabric

import (
	"fmt"
	"strings"
	"time"

	"github.com/inaemu/inaemu/frames"
)

// MAC Control on the link directions (IEEE 802.1Qbb priority-based flow
// control over IEEE 802.3 Annex 31D), on when a fabric's congestion
// features are (Config.congestion): otherwise no direction has a
// pfcState and no frame is looked at.
//
//   - Receiving: a MAC Control frame (EtherType 0x8808) that arrives is
//     captured like any frame, then consumed by the receiving MAC: never
//     handed to the switch or NIC. A well-formed PFC frame pauses the
//     transmitter at the same end, the reverse direction (rev): for each
//     priority i it names, until arrival + quanta[i] × 512 bit times at
//     that transmitter's rate (quanta 0: resumed at once). A frame already
//     on the line finishes. What is paused: a prio queue's class (a
//     switch port), or a NIC's QPs and control frames of that priority
//     (nic.NIC.Pause). The switch is told (switching.Switch.PauseReceived).
//   - Sending: a direction is a switching.PauseEgress. SendPause puts the
//     priorities' times in a control slot (one per priority: a newer time
//     replaces one not yet sent) that goes as one PFC frame at the next
//     frame boundary, ahead of any data and never paused itself, from the
//     transmitter's MAC (a switch port's PortMAC, a NIC's own).

// pfcState is a link direction's MAC Control: its pending PFC frame, what
// a pause of its transmitter acts on, and its counters per priority.
type pfcState struct {
	pending    bool
	ctlEnable  uint8
	ctlQuanta  [8]uint16
	pauseQueue *Prio                                  // the egress queue, when it pauses by class
	pauseSrc   interface{ Pause(int, time.Duration) } // the pull source (a NIC), if any
	// onPause tells the transmitting switch a PFC frame paused its port
	// (nil for a NIC's direction).
	onPause func(enable uint8, quanta [8]uint16)
	// The switches at either end (indices into Fabric.Switches, -1 for a
	// host), and the port this direction arrives by at toSw.
	fromSw, toSw, toPort int
	fromPort             int    // the port it leaves fromSw by
	malformed            uint64 // MAC Control frames received that were not PFC
	cls                  [8]pfcClass
}

// pfcClass counts one priority of a direction's transmitter.
type pfcClass struct {
	sent, received uint64
	pausedNs       time.Duration // closed pause intervals
	since, until   time.Duration // the last pause interval
}

// PortMAC is switch sw's port p's MAC, the source of the PFC frames it
// sends: 02:1a:e1:SS:SS:PP, locally administered (the NICs' are
// 02:1a:e0:...), SS the switch's index, PP the port.
func PortMAC(sw, p int) [6]byte {
	return [6]byte{0x02, 0x1A, 0xE1, byte(sw >> 8), byte(sw), byte(p)}
}

// SendPause sends a PFC frame ahead of the direction's queue (see
// switching.PauseEgress). Without MAC Control it does nothing.
func (d *linkDir) SendPause(enable uint8, quanta [8]uint16) {
	p := d.pfc
	if p == nil || enable == 0 {
		return
	}
	for i := range quanta {
		if enable&(1<<i) != 0 {
			p.ctlQuanta[i] = quanta[i]
		}
	}
	p.ctlEnable |= enable
	p.pending = true
	d.wake(d.fab.Clock.Now())
}

// takePause writes the pending PFC frame into the transmit buffer.
func (d *linkDir) takePause() int {
	p := d.pfc
	n := frames.BuildPFC(d.txBuf, d.mac, p.ctlEnable, p.ctlQuanta)
	for i := range p.cls {
		if p.ctlEnable&(1<<i) != 0 {
			p.cls[i].sent++
		}
	}
	p.pending, p.ctlEnable, p.ctlQuanta = false, 0, [8]uint16{}
	return n
}

// quantaTime is q pause quanta (512 bit times each) at the direction's
// rate, rounded up to the nanosecond.
func (d *linkDir) quantaTime(q uint16) time.Duration {
	ps := int64(q) * (frames.PauseQuantumBits / 8) * d.bytePs
	return time.Duration((ps + 999) / 1000)
}

// macControl consumes a MAC Control frame that arrived at now.
func (d *linkDir) macControl(frame []byte, now time.Duration) {
	enable, quanta, ok := frames.ParsePFC(frame)
	if !ok {
		d.pfc.malformed++
		return
	}
	r := d.rev
	if r == nil || r.pfc == nil {
		return
	}
	rp := r.pfc
	resumed := false
	for i := range quanta {
		if enable&(1<<i) == 0 {
			continue
		}
		until := now + r.quantaTime(quanta[i])
		c := &rp.cls[i]
		c.received++
		if c.until > now { // paused now: the new time replaces the old
			c.until = until
		} else {
			c.pausedNs += c.until - c.since
			c.since, c.until = now, until
		}
		if rp.pauseQueue != nil {
			rp.pauseQueue.Pause(i, until)
		}
		if rp.pauseSrc != nil {
			rp.pauseSrc.Pause(i, until)
		}
		resumed = resumed || until <= now
	}
	if resumed && rp.pauseQueue != nil {
		r.wake(now)
	}
	if rp.onPause != nil {
		rp.onPause(enable, quanta)
	}
}

// pausedAt reports whether the direction's priority i is paused at now,
// and since when without a break.
func (p *pfcState) pausedAt(i int, now time.Duration) (since time.Duration, paused bool) {
	c := &p.cls[i]
	return c.since, c.until > now
}

// PFCStats are one link direction's PFC and ECN counters for one
// priority, seen from its transmitter.
type PFCStats struct {
	Direction string `json:"direction"`
	// Switch and Port are the switch port the direction leaves by (for
	// the switch's report); Switch is empty for a NIC's direction.
	Switch   string `json:"switch,omitempty"`
	Port     int    `json:"port"`
	Priority int    `json:"priority"`
	// PausesSent are the PFC frames naming this priority the direction's
	// transmitter sent (pauses and resumes alike).
	PausesSent uint64 `json:"pauses_sent"`
	// PausesReceived are the PFC frames naming it that arrived for this
	// transmitter (on the reverse direction).
	PausesReceived uint64 `json:"pauses_received"`
	// PausedNs is how long the transmitter was paused for the priority.
	PausedNs int64 `json:"paused_ns"`
	// ECNMarks are frames of the priority its egress queue marked CE.
	ECNMarks uint64 `json:"ecn_marks"`
}

// PFCStats are the PFC and ECN counters of every direction and priority
// that saw any, in direction then priority order (nil without MAC
// Control).
func (f *Fabric) PFCStats() []PFCStats {
	now := f.Clock.Now()
	var out []PFCStats
	for _, d := range f.dirs {
		p := d.pfc
		if p == nil {
			continue
		}
		for i := range p.cls {
			c := &p.cls[i]
			s := PFCStats{Direction: d.name, Port: -1, Priority: i, PausesSent: c.sent, PausesReceived: c.received,
				PausedNs: int64(c.pausedNs + min(c.until, now) - c.since)}
			if p.pauseQueue != nil {
				s.ECNMarks = p.pauseQueue.MarkedBy[i]
			}
			if s != (PFCStats{Direction: d.name, Port: -1, Priority: i}) {
				if p.fromSw >= 0 {
					s.Switch, s.Port = f.Switches[p.fromSw].Name, p.fromPort
				}
				out = append(out, s)
			}
		}
	}
	return out
}

// Deadlock is a cycle of link directions between switches, each paused
// for Priority since Since at the latest and holding frames of it that
// entered its switch by the previous direction of the cycle: no frame of
// the priority can move again.
type Deadlock struct {
	Priority   int           `json:"priority"`
	Directions []string      `json:"directions"`
	Since      time.Duration `json:"since_ns"`
}

// String is the one line a run ends with.
func (d Deadlock) String() string {
	return fmt.Sprintf("PFC deadlock on priority %d: %s paused since %v", d.Priority, strings.Join(d.Directions, " → "), d.Since)
}

// Deadlocks finds PFC deadlocks: for each priority, the cycles of
// switch-to-switch directions e1 → e2 → ... → e1 in which every direction
// has been paused for the priority continuously since now − minPaused or
// earlier, and each e(k+1) (leaving the switch e(k) arrives at) holds
// frames of the priority that came in by e(k): e(k)'s receiver pauses it
// because its buffer holds frames that cannot leave by e(k+1) (circular
// buffer dependency: Guo et al., "RDMA over Commodity Ethernet at Scale",
// SIGCOMM '16, §4.3; Hu et al., "Deadlocks in Datacenter Networks: Why Do
// They Form, and How to Avoid Them", HotNets '16). Each direction is in
// at most one reported cycle; cycles start at their first direction in
// the fabric's order.
func (f *Fabric) Deadlocks(minPaused time.Duration) []Deadlock {
	now := f.Clock.Now()
	var out []Deadlock
	for prio := range 8 {
		// Candidates: paused long enough, holding frames of prio.
		var cand []*linkDir
		for _, d := range f.dirs {
			p := d.pfc
			if p == nil || p.fromSw < 0 || p.toSw < 0 || p.pauseQueue == nil || p.pauseQueue.ClassLen(prio) == 0 {
				continue
			}
			if since, paused := p.pausedAt(prio, now); paused && since <= now-minPaused {
				cand = append(cand, d)
			}
		}
		next := func(d *linkDir) []*linkDir { // the candidates d waits on
			var n []*linkDir
			for _, e := range cand {
				if e.pfc.fromSw == d.pfc.toSw && e.pfc.pauseQueue.holdsFrom(prio, d.pfc.toPort) {
					n = append(n, e)
				}
			}
			return n
		}
		used := map[*linkDir]bool{}
		for _, start := range cand {
			if used[start] {
				continue
			}
			if cyc := findCycle(start, next, used); cyc != nil {
				dl := Deadlock{Priority: prio}
				for _, d := range cyc {
					used[d] = true
					dl.Directions = append(dl.Directions, d.name)
					since, _ := d.pfc.pausedAt(prio, now)
					dl.Since = max(dl.Since, since)
				}
				out = append(out, dl)
			}
		}
	}
	return out
}

// findCycle is a cycle through start in the graph next describes,
// avoiding used nodes (depth first, in next's order), or nil.
func findCycle(start *linkDir, next func(*linkDir) []*linkDir, used map[*linkDir]bool) []*linkDir {
	path := []*linkDir{start}
	seen := map[*linkDir]bool{start: true}
	var dfs func(d *linkDir) bool
	dfs = func(d *linkDir) bool {
		for _, e := range next(d) {
			if e == start {
				return true
			}
			if seen[e] || used[e] {
				continue
			}
			seen[e] = true
			path = append(path, e)
			if dfs(e) {
				return true
			}
			path = path[:len(path)-1]
		}
		return false
	}
	if dfs(start) {
		return path
	}
	return nil
}
