package main

import (
	"fmt"
	"strings"

	"github.com/inaemu/inaemu/emu/scenario"
	"github.com/inaemu/inaemu/faults"
	"github.com/inaemu/inaemu/internal/units"
)

// note prints a one-line note on stderr: a value that reads as tc reads
// it, which may not be what the user meant (10Gbps is bytes, a bare time
// is nanoseconds). It never changes what runs.
func note(e *cmdEnv, where, text string) {
	if text != "" {
		fmt.Fprintf(e.stderr, "inaemu: note: %s%s\n", where, text)
	}
}

// noteValue notes one rate or time given as a flag or a scenario key.
func noteValue(e *cmdEnv, where string, kind scenario.Kind, v string) {
	switch kind {
	case scenario.Rate:
		note(e, where, units.RateNote(v))
	case scenario.Duration:
		note(e, where, faults.DurationNote(v))
	}
}

// printNotes notes the rates and times of a run's settings, from the
// flags and the scenario file, and the bare times in its netem setting
// and its faults.
func printNotes(e *cmdEnv, j *jobFlags, merged *scenario.Scenario) {
	for _, o := range j.opts {
		if o.Kind != scenario.Rate && o.Kind != scenario.Duration {
			continue
		}
		f, err := o.Field(merged)
		if err != nil || f.String() == "" {
			continue
		}
		where := "scenario " + o.Key + ": "
		if e.changed(o.FlagName()) {
			where = "--" + o.FlagName() + " "
		}
		noteValue(e, where, o.Kind, f.String())
	}
	noteNetem(e, merged.NetemSpec())
	for _, spec := range merged.Faults {
		for _, tok := range strings.Fields(spec) {
			if d, ok := strings.CutPrefix(tok, "delay="); ok {
				note(e, "--fault '"+spec+"': delay=", faults.DurationNote(d))
			}
		}
	}
}

// noteNetem notes bare times in a netem setting: the delay and its
// jitter.
func noteNetem(e *cmdEnv, spec string) {
	toks := strings.Fields(spec)
	for i, t := range toks {
		if t != "delay" && t != "latency" {
			continue
		}
		for k := i + 1; k < len(toks) && k <= i+2; k++ { // the delay and the jitter, if any
			note(e, "netem '"+spec+"': ", faults.DurationNote(toks[k]))
		}
	}
}
