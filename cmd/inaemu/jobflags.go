package main

import (
	crand "crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"reflect"
	"runtime/debug"
	"slices"
	"strconv"

	"github.com/spf13/cobra"

	"github.com/inaemu/inaemu/emu"
	"github.com/inaemu/inaemu/emu/scenario"
	"github.com/inaemu/inaemu/emu/topo"
	"github.com/inaemu/inaemu/internal/units"
)

// optionValue is the flag of one scenario.Option: it writes the Scenario
// field the option's key names, so what a flag sets and what a file sets
// are the same field, merged by Scenario.Override.
type optionValue struct {
	o scenario.Option
	f reflect.Value
}

// String is the value as given, or the option's default before any.
func (v *optionValue) String() string {
	if v.f.IsZero() {
		return v.o.Default
	}
	switch x := v.f.Interface().(type) {
	case string:
		return x
	case *int:
		return strconv.Itoa(*x)
	case *uint64:
		return strconv.FormatUint(*x, 10)
	case []string:
		return fmt.Sprint(x)
	case *topo.Spec:
		return x.Kind
	}
	return fmt.Sprint(v.f.Interface())
}

// Type is the value's name in --help: the option's Arg.
func (v *optionValue) Type() string { return v.o.Arg }

func (v *optionValue) Set(s string) error {
	switch v.f.Interface().(type) {
	case string:
		v.f.SetString(s)
	case *int:
		n, err := strconv.Atoi(s)
		if err != nil {
			return fmt.Errorf("want a whole number")
		}
		v.f.Set(reflect.ValueOf(&n))
	case *uint64:
		n, err := strconv.ParseUint(s, 0, 64)
		if err != nil {
			return fmt.Errorf("want a whole number from 0 to 2^64-1")
		}
		v.f.Set(reflect.ValueOf(&n))
	case []string:
		v.f.Set(reflect.Append(v.f, reflect.ValueOf(s)))
	case *topo.Spec:
		sp, err := topo.ParseFlag(s)
		if err != nil {
			return err
		}
		v.f.Set(reflect.ValueOf(sp))
	default:
		return fmt.Errorf("option %s: no flag for a %s", v.o.Key, v.f.Type()) // a bug: TestOptionFields
	}
	return nil
}

// jobFlags are the options of a run a command takes, one flag each, and
// the command's own flags that decide how they combine: --scenario (run)
// and --max-memory (run, sweep, host).
type jobFlags struct {
	cmd      *cobra.Command
	over     scenario.Scenario // what the flags given set
	opts     []scenario.Option // the options declared as flags
	scenario string            // --scenario FILE
	maxMem   string            // --max-memory
	hasMem   bool              // --max-memory is declared
	starOnly bool              // the network options are declared only to be refused (TAP commands)
	// seeded: the seed was given (flag or file); without one a fresh
	// seed is drawn and printed.
	seeded bool
	// timed: the ACK timeout was given (flag or file): a run on the wall
	// clock keeps it, so that a scenario replays exactly.
	timed bool
}

// addJobFlags declares a flag for every option of the groups.
func addJobFlags(c *cobra.Command, groups ...scenario.Group) *jobFlags {
	j := &jobFlags{cmd: c}
	for _, o := range scenario.Options() {
		if slices.Contains(groups, o.Group) {
			j.addOption(o)
		}
	}
	return j
}

// addOption declares one option's flag.
func (j *jobFlags) addOption(o scenario.Option) {
	f, err := o.Field(&j.over)
	if err != nil {
		panic(err) // the table and Scenario disagree: TestEveryKeyIsOneOption
	}
	fl := j.cmd.Flags().VarPF(&optionValue{o, f}, o.FlagName(), "", o.Help)
	if o.Default == "" {
		fl.DefValue = "" // shows no default
	}
	j.opts = append(j.opts, o)
}

// addScenarioFlag declares --scenario.
func (j *jobFlags) addScenarioFlag() {
	j.cmd.Flags().StringVar(&j.scenario, "scenario", "", "read settings, faults, topology and jobs from a YAML `FILE` (flags given too override it)")
}

// addMemoryFlag declares --max-memory, for the commands that allocate the
// job's buffers (run, sweep, host).
func (j *jobFlags) addMemoryFlag() {
	j.hasMem = true
	j.cmd.Flags().StringVar(&j.maxMem, "max-memory", "", "refuse a job that needs more memory than this (e.g. 8GiB, or off); default: the memory available (MemAvailable, or the cgroup's limit)")
}

// refuseNetwork declares the network options hidden, only to refuse them
// with a reason: the TAP commands run on the star of TAP ports.
func (j *jobFlags) refuseNetwork() {
	j.starOnly = true
	for _, o := range scenario.Options() {
		if o.Group == scenario.NetworkGroup {
			j.addOption(o)
			_ = j.cmd.Flags().MarkHidden(o.FlagName())
		}
	}
}

// refuseTopology prints why a network option (--topology,
// --switch-memory, the buffer and PFC settings) cannot be used with a
// network of TAPs (a star, no emulated switch memory or buffer) and
// reports whether it did. Port security is the live switch's too.
func (j *jobFlags) refuseTopology(e *cmdEnv, where string) bool {
	for _, o := range scenario.Options() {
		if f := o.FlagName(); o.Group == scenario.NetworkGroup && o.Key != "port_security" && e.changed(f) {
			e.usageError("--%s: %s runs on the star of TAP ports (one per rank); topologies, switch memory and switch buffers are emulated only ('inaemu run' without --backend tap)", f, where)
			return true
		}
	}
	return false
}

// maxMemory is Config.MaxMemory from --max-memory.
func (j *jobFlags) maxMemory() (int64, error) {
	switch {
	case !j.hasMem:
		return -1, nil // the switch holds no tensors
	case j.maxMem == "":
		return 0, nil
	case j.maxMem == "off" || j.maxMem == "none":
		return -1, nil
	}
	n, err := units.ParseSize(j.maxMem)
	if err != nil {
		return 0, fmt.Errorf("--max-memory: %v, or off", err)
	}
	return n, nil
}

// merged is the scenario file (if any) with the flags given over it;
// false means a usage error has been printed.
func (j *jobFlags) merged(e *cmdEnv) (*scenario.Scenario, bool) {
	merged := &scenario.Scenario{}
	if j.scenario != "" {
		var err error
		if merged, err = scenario.Load(j.scenario); err != nil {
			e.usageError("scenario: %v", err)
			return nil, false
		}
	}
	over := j.over
	if j.starOnly { // refused before; never applied
		over.Topology, over.SwitchMemory = nil, ""
	}
	merged.Override(&over)
	j.seeded = merged.Seed != nil
	j.timed = merged.Timeout != nil
	printNotes(e, j, merged)
	return merged, true
}

// config builds the job from the scenario file and the flags; false means
// a usage error has been printed.
func (j *jobFlags) config(e *cmdEnv) (emu.Config, bool) {
	cfg := emu.DefaultConfig()
	if j.starOnly && j.refuseTopology(e, "inaemu "+e.name) {
		return cfg, false
	}
	if !j.countsInRange(e) {
		return cfg, false
	}
	merged, ok := j.merged(e)
	if !ok {
		return cfg, false
	}
	// One Apply of the file with the flags over it, so that a topology
	// from the file takes --link, --latency and --queue where it sets none.
	if err := merged.Apply(&cfg); err != nil {
		if se := (*scenario.Error)(nil); j.scenario != "" && errors.As(err, &se) && !j.fromFlags(e, se.Key) {
			e.usageError("scenario %s: %v", j.scenario, err)
		} else {
			e.usageError("%v", err)
		}
		return cfg, false
	}
	if !j.seeded {
		cfg.Seed = freshSeed()
	}
	mem, err := j.maxMemory()
	if err != nil {
		e.usageError("%v", err)
		return cfg, false
	}
	cfg.MaxMemory = mem
	if err := cfg.Validate(); err != nil {
		e.usageError("%v", err)
		return cfg, false
	}
	// The jobs' estimate fits; tell the garbage collector the limit too,
	// so garbage never takes the heap past it.
	if mem == 0 {
		mem, _ = emu.AvailableMemory()
	}
	if mem > 0 {
		debug.SetMemoryLimit(mem)
	}
	return cfg, true
}

// countsInRange refuses a count given as a flag outside its option's
// bounds, before anything is sized by it (--workers -1 was a slice of
// length -1), in emu's words: "--workers -1: want 1..64". A file's counts
// are checked by Apply.
func (j *jobFlags) countsInRange(e *cmdEnv) bool {
	for _, o := range j.opts {
		f, _ := o.Field(&j.over)
		if n, ok := f.Interface().(*int); ok && n != nil {
			if err := o.Check(*n); err != nil {
				e.usageError("--%s %d: %v", o.FlagName(), *n, err)
				return false
			}
		}
	}
	return true
}

// fromFlags reports whether the scenario key that Apply refused was given
// on the command line (so the error is the flag's, not the file's).
func (j *jobFlags) fromFlags(e *cmdEnv, key string) bool {
	switch key {
	case "netem":
		for _, o := range j.opts {
			if o.Group == scenario.FaultGroup && o.Kind != scenario.List && e.changed(o.FlagName()) {
				return true
			}
		}
		return false
	case "workers":
		return e.changed("workers") || e.changed("topology")
	}
	o, ok := scenario.OptionByKey(key)
	return ok && e.changed(o.FlagName())
}

// freshSeed is a seed from the system's randomness, short enough to type.
func freshSeed() uint64 {
	var b [8]byte
	_, _ = crand.Read(b[:])
	return binary.LittleEndian.Uint64(b[:]) >> 16
}
