package job

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/inaemu/inaemu/emu/fabric"
	"github.com/inaemu/inaemu/emu/nic"
	"github.com/inaemu/inaemu/emu/nic/dcqcn"
	"github.com/inaemu/inaemu/emu/switching"
	"github.com/inaemu/inaemu/frames"
)

// Congestion is what a run's network does when it is congested: the
// switches' shared buffer and its PFC thresholds (emu/switching), and the
// egress queues' scheduler and ECN marking (emu/fabric). The zero value
// is the network inaemu always had: tail-drop FIFOs, no pauses, no marks.
type Congestion struct {
	// Buffer is every switch's shared buffer; its Lossless mask is what
	// PFC resolves to (ResolvePFC).
	Buffer switching.BufferConfig
	// PFC is which priorities are lossless: "" or "off" (none), "on" (the
	// priorities the run's jobs send on, DSCP>>3 of each job's DSCP), or
	// a list of priorities "3" or "3,4".
	PFC string
	// Scheduler is the switch egress queues' scheduler across priorities:
	// "" (strict priority when the priority queues are on), "strict" or
	// "dwrr"; DWRRWeights are DWRR's weights per priority (0: 1).
	Scheduler   string
	DWRRWeights [8]int
	// RED is every switch egress queue's RED/ECN marking profile, per
	// priority class (the zero value marks nothing).
	RED fabric.RED
	// NICRxRate, if positive, is how fast every host drains its NIC's
	// receive buffer (bits per second), of NICRxBuffer bytes (0: a
	// ConnectX port's, nic.DefaultRxBufferBytes): a host slower than its
	// link, whose NIC pauses its lossless priorities (with PFC) or drops.
	NICRxRate   float64
	NICRxBuffer int64
}

// ParsePFC reads a --pfc value: off, on, or priorities 0..7 separated by
// commas (auto is true for on: the jobs' own priorities).
func ParsePFC(s string) (mask uint8, auto bool, err error) {
	switch s {
	case "", "off":
		return 0, false, nil
	case "on":
		return 0, true, nil
	}
	for _, f := range strings.Split(s, ",") {
		p, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || p < 0 || p > 7 {
			return 0, false, fmt.Errorf("--pfc %q: want off, on, or priorities 0..7 separated by commas (e.g. 3 or 3,4)", s)
		}
		mask |= 1 << p
	}
	return mask, false, nil
}

// lossless is the priorities PFC protects in a run of jobs: the list
// --pfc gives, or with on each job's priority.
func (c *Congestion) lossless(jobs []JobConfig) (uint8, error) {
	mask, auto, err := ParsePFC(c.PFC)
	if err != nil || !auto {
		return mask, err
	}
	for _, j := range jobs {
		mask |= 1 << (j.Cfg.DSCP >> 3)
	}
	return mask, nil
}

// ParseCC reads a congestion control's name: none or dcqcn.
func ParseCC(s string) (string, error) {
	switch s {
	case CCNone, CCDCQCN:
		return s, nil
	}
	return "", fmt.Errorf("%q: want none or dcqcn", s)
}

// enableDCQCN gives the NICs of a job with DCQCN the offload (once per
// NIC: jobs sharing a NIC share its reaction and notification points, as
// they share a real NIC's), at the rate of the NIC's link.
func (u *Session) enableDCQCN(r *Job) error {
	if r.Cfg.CC != CCDCQCN {
		return nil
	}
	if u.dcqcn == nil {
		u.dcqcn = map[*nic.NIC]*dcqcn.Offload{}
	}
	for _, w := range r.Workers {
		if w.NIC == nil || u.dcqcn[w.NIC] != nil {
			continue
		}
		o, err := dcqcn.Enable(w.NIC, dcqcn.DefaultParams(u.Fab.NICRate(w.NIC)))
		if err != nil {
			return fmt.Errorf("job %s: %s: %v", r.Name, w.NIC.Name, err)
		}
		u.dcqcn[w.NIC] = o
	}
	return nil
}

// dcqcnReport sums the DCQCN counters of the job's NICs.
func (r *Job) dcqcnReport() *dcqcn.Stats {
	var s dcqcn.Stats
	seen := map[*nic.NIC]bool{}
	for _, w := range r.Workers {
		o := r.run.dcqcn[w.NIC]
		if o == nil || seen[w.NIC] {
			continue
		}
		seen[w.NIC] = true
		st := o.Stats()
		s.Add(&st)
		s.QPs = append(s.QPs, st.QPs...)
	}
	return &s
}

// apply gives the fabric the network's congestion settings, PFC's
// lossless priorities resolved against the run's jobs.
func (c *Congestion) apply(fc *fabric.Config, jobs []JobConfig) error {
	lossless, err := c.lossless(jobs)
	if err != nil {
		return err
	}
	fc.Scheduler, fc.DWRRWeights, fc.RED = c.Scheduler, c.DWRRWeights, c.RED
	fc.NICRxRate, fc.NICRxBuffer = c.NICRxRate, c.NICRxBuffer
	if lossless == 0 && !c.Buffer.Enforce && c.Scheduler == "" && c.RED == (fabric.RED{}) && !c.sized() {
		// Nothing asks the memory manager to act: the switches only count,
		// as they always did (the buffer's size matters only when managed).
		return nil
	}
	// A network with any congestion setting, or a buffer of a size
	// other than the default, has switches whose memory manager acts:
	// lossless priorities are paused for, the others admitted against
	// the dynamic egress threshold (Enforce), so the switch buffer, not a
	// link's frame queue, is what fills and drops (--switch-buffer 1MB
	// alone is a lossy switch with a 1 MB shared buffer).
	fc.Buffer = c.Buffer
	fc.Buffer.Lossless, fc.Buffer.Enforce = lossless, true
	return nil
}

// deadlockPauses is how many of the longest pause (65535 quanta on the
// slowest link) a cycle of directions must all have stayed paused before
// the run calls it a PFC deadlock: a pause storm that is only congestion
// releases a direction within a few pause times as its queues drain
// (every refresh is sent while the ingress is still above XON), while a
// deadlocked cycle never does.
const deadlockPauses = 10

// deadlocked looks for a PFC deadlock (fabric.Deadlocks) once per
// deadlockAfter/2 of virtual time, when the network has MAC Control; a
// deadlock it finds ends the run instead of leaving it to refresh its
// pauses until --max-time.
func (u *Session) deadlocked() *fabric.Deadlock {
	if u.Fab.Live() || u.cfg.Buffer.Lossless == 0 && u.cfg.PFC == "" {
		return nil
	}
	now := u.Fab.Clock.Now()
	if u.deadlockAfter == 0 {
		slowest := 0.0
		for _, l := range u.Fab.Topo.Links {
			if slowest == 0 || l.Rate < slowest {
				slowest = l.Rate
			}
		}
		if slowest <= 0 {
			return nil
		}
		pause := time.Duration(float64(0xFFFF*frames.PauseQuantumBits) / slowest * 1e9)
		u.deadlockAfter = deadlockPauses * pause
	}
	if now < u.deadlockAt {
		return nil
	}
	u.deadlockAt = now + u.deadlockAfter/2
	if d := u.Fab.Deadlocks(u.deadlockAfter); len(d) > 0 {
		u.deadlocks = d
		return &d[0]
	}
	return nil
}

// NICRx is one NIC's receive buffer (a slow receiver, --nic-rx-rate).
type NICRx struct {
	NIC           string `json:"nic"`
	Drops         uint64 `json:"rx_buffer_drops"`
	PausesXOFF    uint64 `json:"rx_pauses_xoff"`
	PausesRefresh uint64 `json:"rx_pauses_refresh"`
	PausesXON     uint64 `json:"rx_pauses_xon"`
	MaxBytes      int64  `json:"rx_buffer_max_bytes"`
	PausedNs      int64  `json:"rx_paused_ns"`
}

// nicRx is the receive buffers of the fabric's NICs that received
// through one.
func (u *Session) nicRx() []NICRx {
	if u.cfg.NICRxRate == 0 {
		return nil
	}
	var out []NICRx
	for _, h := range u.Fab.NICs {
		s := h.StatsNow()
		if s.RxBufferMaxBytes == 0 && s.RxBufferDrops == 0 {
			continue
		}
		out = append(out, NICRx{NIC: h.Name, Drops: s.RxBufferDrops, PausesXOFF: s.RxPausesXOFF, PausesRefresh: s.RxPausesRefresh,
			PausesXON: s.RxPausesXON, MaxBytes: s.RxBufferMaxBytes, PausedNs: s.RxPausedNs})
	}
	return out
}

// check refuses buffer settings nothing would act on: XOFF, alpha and
// headroom are PFC's, and alpha scales only a dynamic XOFF.
func (c *Congestion) check() error {
	_, _, err := ParsePFC(c.PFC)
	if err != nil {
		return err
	}
	pfc := c.PFC != "" && c.PFC != "off"
	switch {
	case !pfc && c.Buffer.XOFF != 0:
		return fmt.Errorf("--pfc-xoff: an XOFF threshold needs --pfc (the priorities it pauses)")
	case !pfc && c.Buffer.Alpha != 0:
		return fmt.Errorf("--pfc-alpha: the dynamic XOFF threshold needs --pfc (the priorities it pauses)")
	case !pfc && c.Buffer.Headroom != 0:
		return fmt.Errorf("--pfc-headroom: headroom is for --pfc's lossless priorities")
	case c.Buffer.XOFF != 0 && c.Buffer.Alpha != 0:
		return fmt.Errorf("--pfc-alpha with --pfc-xoff %d: alpha scales the dynamic threshold, which a static XOFF replaces", c.Buffer.XOFF)
	}
	return nil
}

// sized reports whether the run gives the switches a buffer of its own
// size (--switch-buffer other than the default).
func (c *Congestion) sized() bool {
	return c.Buffer.Bytes != 0 && c.Buffer.Bytes != switching.DefaultBufferBytes
}
