package ars

import (
	"fmt"
	"time"

	"github.com/inaemu/inaemu/emu/netreduce"
	"github.com/inaemu/inaemu/emu/switching"
	"github.com/inaemu/inaemu/internal/units"
)

func init() {
	switching.RegisterProgram(Name, "AllReduce-Switch (TCSI '21): NetReduce's hosts, a 20-byte header in WRITE FIRST only, a 4×128-frame buffer indexed by PSN that answers re-sent frames, a WRR output arbiter", newProgram)
}

// registered is the program as the switch installs it: its rings are
// refused beyond the switch's memory budget.
type registered struct {
	*Program
	env switching.ProgramEnv
}

var (
	_ netreduce.RingHost   = (*registered)(nil)
	_ netreduce.INAHeader  = (*registered)(nil)
	_ netreduce.RingMemory = (*registered)(nil)
	_ switching.ReportSum  = Report{}
	_ switching.ReportLine = Report{}
)

func newProgram(env switching.ProgramEnv) switching.Program {
	return &registered{Program: New(env.Timing, env.Clock), env: env}
}

// AddRing refuses a ring whose buffers do not fit the switch's memory
// budget, then sets it up.
func (r *registered) AddRing(cfg netreduce.RingConfig) error {
	if r.env.MemoryBudget != nil && r.env.MemoryUsed != nil {
		if budget := r.env.MemoryBudget(); budget > 0 {
			used, need := r.env.MemoryUsed(), r.RingMemoryBytes(cfg)
			if used+need > budget {
				return fmt.Errorf("switch %s: ring %d needs %s of AllReduce-Switch buffers (%d frames × (%d ports' header and payload slots + the result)) and %s of the %s budget is in use: raise --switch-memory",
					r.env.Switch, cfg.ID, units.FormatBytes(need), BufferSlots, cfg.Workers, units.FormatBytes(used), units.FormatBytes(budget))
			}
		}
	}
	return r.Program.AddRing(cfg)
}

// Sum adds another switch's report (switching.ReportSum).
func (r Report) Sum(other any) any {
	o, ok := other.(Report)
	if !ok {
		return r
	}
	s, x := &r.Stats, o.Stats
	s.Packets += x.Packets
	s.Flows += x.Flows
	s.Aggregations += x.Aggregations
	s.ResultPackets += x.ResultPackets
	s.ResultResends += x.ResultResends
	s.EarlyResends += x.EarlyResends
	s.FirstResends += x.FirstResends
	s.FirstLostDrops += x.FirstLostDrops
	s.GapDrops += x.GapDrops
	s.BusyDrops += x.BusyDrops
	s.ICRCDrops += x.ICRCDrops
	s.BadDrops += x.BadDrops
	s.PortDrops += x.PortDrops
	s.StaleForwards += x.StaleForwards
	s.ArbiterWaits += x.ArbiterWaits
	s.ArbiterWaitNS += x.ArbiterWaitNS
	r.Rings += o.Rings
	r.MemoryBytes += o.MemoryBytes
	return r
}

// Line is the report's line in inaemu run's and replay's text
// (switching.ReportLine): the work, the re-sends answered from the
// buffer, the drops by kind and the output arbiter's waits.
func (r Report) Line() string {
	s := r.Stats
	return fmt.Sprintf("%d aggregations, %d result re-sends, %d early re-sends, %d first re-reads, %d stale forwards; drops: %d first-lost, %d gap, %d busy, %d ICRC, %d bad, %d port; %d arbiter waits (%v in all)",
		s.Aggregations, s.ResultResends, s.EarlyResends, s.FirstResends, s.StaleForwards,
		s.FirstLostDrops, s.GapDrops, s.BusyDrops, s.ICRCDrops, s.BadDrops, s.PortDrops,
		s.ArbiterWaits, time.Duration(s.ArbiterWaitNS))
}
