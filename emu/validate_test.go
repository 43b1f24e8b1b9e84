package emu

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/inaemu/inaemu/emu/netreduce"
	"github.com/inaemu/inaemu/emu/topo"
	"github.com/inaemu/inaemu/faults"
	"github.com/inaemu/inaemu/internal/units"
)

// A fault that names a port, a spoofing port or a QP the job does not
// have would never fire: Validate (so Run, and every scenario) refuses it,
// naming the field and the valid range.
func TestValidateFaultTargets(t *testing.T) {
	for spec, want := range map[string][]string{
		"drop port=4 dir=in class=data nth=1": {`"drop port=4 dir=in class=data nth=1"`, "port=4", "0..3"},
		"drop port=65536":                     {"port=65536", "0..3"},
		"spoof=9 port=1 class=data nth=5":     {"spoof=9", "0..3"},
		"drop qp=5":                           {"qp=0x5", "0x11", "0x12"},
		"corrupt qp=0x13 dir=out":             {"qp=0x13"},
	} {
		cfg := DefaultConfig()
		cfg.Workers = 4
		ev, err := faults.Parse(spec)
		require.NoError(t, err, spec)
		cfg.Events = []faults.Event{ev}
		err = cfg.Validate()
		var ce *ConfigError
		require.True(t, errors.As(err, &ce), "%s: want a ConfigError, got %v", spec, err)
		for _, w := range want {
			assert.Contains(t, err.Error(), w, spec)
		}
	}
	for _, spec := range []string{"drop port=3 dir=in class=data nth=1", "drop qp=0x11", "drop qp=18", "spoof=0 port=3", "drop class=nak"} {
		cfg := DefaultConfig()
		cfg.Workers = 4
		ev, err := faults.Parse(spec)
		require.NoError(t, err, spec)
		cfg.Events = []faults.Event{ev}
		assert.NoError(t, cfg.Validate(), spec)
	}
}

// Durations set in code (not parsed) are held to the same bound.
func TestValidateDurations(t *testing.T) {
	for name, set := range map[string]func(*Config){
		"--max-time":   func(c *Config) { c.MaxVirtual = 2 * time.Hour },
		"--max-time -": func(c *Config) { c.MaxVirtual = -1 },
		"--latency":    func(c *Config) { c.Link.Latency = faults.MaxDuration + 1 },
		"netem delay":  func(c *Config) { c.Netem.Delay = 1 << 62 },
		"netem jitter": func(c *Config) { c.Netem.Jitter = -time.Second },
		"delay 3h": func(c *Config) {
			c.Events = []faults.Event{{Action: faults.ActDelay, Delay: 3 * time.Hour, Port: -1, QP: -1, PSN: -1}}
		},
	} {
		cfg := DefaultConfig()
		set(&cfg)
		err := cfg.Validate()
		require.Error(t, err, name)
		assert.Contains(t, err.Error(), strings.TrimSuffix(name, " -"), name)
		assert.Contains(t, err.Error(), "1h0m0s", name)
	}
	cfg := DefaultConfig()
	cfg.MaxVirtual, cfg.Link.Latency = faults.MaxDuration, faults.MaxDuration
	assert.NoError(t, cfg.Validate(), "the bound itself is allowed")
}

// The estimate follows the formula in MemoryEstimate's comment.
func TestEstimateMemory(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Workers, cfg.TensorBytes = 64, 1<<30
	nr := EstimateMemory(cfg)
	// NetReduce: a send ring and a result ring per worker of 4N+8 = 16
	// message slots of 170 × 1024 bytes, the expected sums (one per
	// slot), a scratch message and each worker's tensor generated ahead
	// (four 64 KiB blocks): nothing grows with the tensor but the posted
	// receive requests (one per message).
	assert.Equal(t, int64(2*64*16*174080+16*174080+174080+64*4*65536), nr.Buffers)
	assert.Equal(t, nr.Buffers+nr.Queues+nr.Switch+nr.Links+nr.Base, nr.Total)
	assert.Less(t, nr.Total, int64(1<<30), "64 workers × 1 GiB in under 1 GiB")
	cfg.TensorBytes = 4 << 30
	assert.Equal(t, nr.Buffers, EstimateMemory(cfg).Buffers, "flat in the tensor size")
	cfg.TensorBytes = 1 << 30

	cfg.Mode = Ring
	ring := EstimateMemory(cfg)
	// Ring: a receive MR of two messages and a pool of 4N+8+8 = 24
	// message buffers per worker, as many expected sums, one scratch.
	assert.Equal(t, int64(64*(2*174080+2*24*174080)+174080), ring.Buffers)
	assert.Less(t, ring.Total, int64(2<<30), "64 workers × 1 GiB ring in under 2 GiB")
	cfg.TensorBytes = 4 << 30
	assert.Equal(t, ring.Buffers, EstimateMemory(cfg).Buffers, "flat in the tensor size")
	cfg.TensorBytes = 1 << 30

	// The switch's part grows with 2N × MsgLen aggregators of W slots, as
	// far as the tensor has messages to fill them.
	cfg = DefaultConfig()
	cfg.Workers, cfg.Window, cfg.MsgLen, cfg.MTU, cfg.TensorBytes = 16, 32, 255, 4096, 64<<20
	sw := EstimateMemory(cfg)
	assert.Equal(t, int64(2*32*255)*(16*(4096+160)+4096)+int64(2*32*255)*(16*32+64), sw.Switch)

	// Many tiny messages: the work requests count.
	cfg = DefaultConfig()
	cfg.Workers, cfg.MsgLen, cfg.MTU, cfg.TensorBytes = 4, 1, 256, 16<<20
	wr := EstimateMemory(cfg)
	assert.Greater(t, wr.Queues, wr.Buffers/4)

	// A long link holds frames: latency raises the links' part, up to what
	// the transport can have outstanding.
	cfg = DefaultConfig()
	cfg.Mode, cfg.Workers, cfg.TensorBytes = Ring, 4, 64<<20
	short := EstimateMemory(cfg)
	cfg.Link.Latency = time.Millisecond
	long := EstimateMemory(cfg)
	cfg.Link.Latency = time.Hour
	longest := EstimateMemory(cfg)
	assert.Less(t, short.Links, long.Links)
	assert.Less(t, long.Links, longest.Links)
	assert.Equal(t, int64(4*2*(2*(24*170)+2)*FrameBytes), longest.Links, "bounded by the window's packets (4N+8+8 messages of 170) and ACKs")
}

// A job over the limit is a ConfigError naming the need, the factor, the
// limit and what to change; --max-memory off (negative) lifts the check.
func TestValidateMemory(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Workers, cfg.TensorBytes, cfg.MaxMemory = 64, 1<<30, 8<<30
	require.NoError(t, cfg.Validate(), "NetReduce streams its tensors")
	cfg.Mode = Ring
	require.NoError(t, cfg.Validate(), "the ring streams its tensors too")
	cfg.MaxMemory = 100 << 20
	err := cfg.Validate()
	var ce *ConfigError
	require.True(t, errors.As(err, &ce), "%v", err)
	assert.Regexp(t, `^the job needs ≈[\d.]+ [MG]iB \(64 workers, window 2\), 100 MiB allowed by --max-memory; use fewer workers, a smaller --window or a shorter --msg-len$`, err.Error())
	_, err = Run(cfg)
	assert.True(t, errors.As(err, &ce), "Run refuses it too, before allocating: %v", err)
	cfg.Mode, cfg.MaxMemory = NetReduce, 100<<20
	assert.Regexp(t, `^the job needs ≈\d+ MiB \(64 workers, window 2\), 100 MiB allowed by --max-memory; use fewer workers or a smaller --window$`, cfg.Validate().Error())
	cfg.MaxMemory = 8 << 30

	cfg.Mode, cfg.Workers, cfg.MTU, cfg.TensorBytes, cfg.Link.Latency, cfg.MaxMemory = Ring, 64, 256, 1<<30, time.Hour, 256<<20
	assert.ErrorContains(t, cfg.Validate(), "--latency", "a long link: the frames on the way dominate")

	cfg.MaxMemory = -1
	assert.NoError(t, cfg.Validate())

	// The machine's own limit: far beyond any machine (a work request
	// per 256-byte message).
	cfg = DefaultConfig()
	cfg.Mode, cfg.Workers, cfg.TensorBytes, cfg.MsgLen, cfg.MTU = Ring, 64, 4<<30, 1, 256
	if avail, ok := AvailableMemory(); !ok || avail > EstimateMemory(cfg).Total {
		t.Skipf("available memory unknown or above %s", units.FormatBytes(EstimateMemory(cfg).Total))
	}
	assert.ErrorContains(t, cfg.Validate(), " available; use a longer --msg-len")
}

// The estimate against the peak RSS of real runs, each in a fresh process
// (this test binary re-run for one job). Slow and memory-hungry (up to
// 4 GiB): INAEMU_MEMTEST=1 go test ./emu -run EstimateMatchesRSS -v
// prints the table; every run's peak must lie between 0.3 and 1.0 times
// its estimate (the emulator's own 64 MiB and the links' worst case make
// small jobs' estimates generous).
func TestEstimateMatchesRSS(t *testing.T) {
	if job := os.Getenv("INAEMU_MEMTEST_JOB"); job != "" {
		measureJob(t, job)
		return
	}
	if os.Getenv("INAEMU_MEMTEST") == "" {
		t.Skip("set INAEMU_MEMTEST=1 to measure peak RSS against the estimate (slow, up to 4 GiB)")
	}
	for _, job := range []string{
		"netreduce 8 16MiB 2 170 1024 1us", "netreduce 8 64MiB 2 170 1024 1us", "ring 8 64MiB 2 170 1024 1us",
		"netreduce 4 256MiB 2 170 1024 1us", "ring 4 256MiB 2 170 1024 1us",
		"netreduce 4 16MiB 2 1 256 1us", "ring 4 16MiB 2 1 256 1us", "ring 4 64MiB 2 170 1024 1ms",
		"netreduce 16 64MiB 32 255 4096 1us", "ring 64 4MiB 2 170 1024 1us", "netreduce 64 16MiB 2 170 1024 1us",
	} {
		cmd := exec.Command(os.Args[0], "-test.run", "^TestEstimateMatchesRSS$", "-test.v")
		cmd.Env = append(os.Environ(), "INAEMU_MEMTEST_JOB="+job)
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "%s", out)
		var est, rss int64
		for _, l := range strings.Split(string(out), "\n") {
			if _, err := fmt.Sscanf(strings.TrimSpace(l), "MEM %d %d", &est, &rss); err == nil {
				break
			}
		}
		require.NotZero(t, rss, "%s", out)
		ratio := float64(rss) / float64(est)
		t.Logf("%-38s estimate %8s  peak RSS %8s  ratio %.2f", job, units.FormatBytes(est), units.FormatBytes(rss), ratio)
		assert.True(t, ratio > 0.3 && ratio <= 1.0, "%s: peak RSS %.2f × the estimate", job, ratio)
	}
}

func measureJob(t *testing.T, job string) {
	f := strings.Fields(job)
	require.Len(t, f, 7)
	cfg := DefaultConfig()
	var err error
	cfg.Mode, err = ParseMode(f[0])
	require.NoError(t, err)
	cfg.Workers, _ = strconv.Atoi(f[1])
	cfg.TensorBytes, err = units.ParseSize(f[2])
	require.NoError(t, err)
	cfg.Window, _ = strconv.Atoi(f[3])
	cfg.MsgLen, _ = strconv.Atoi(f[4])
	cfg.MTU, _ = strconv.Atoi(f[5])
	cfg.Link.Latency, err = faults.ParseDuration(f[6])
	require.NoError(t, err)
	cfg.Seed = 1
	res, err := Run(cfg)
	require.NoError(t, err)
	require.True(t, res.Exact)
	b, err := os.ReadFile("/proc/self/status")
	require.NoError(t, err)
	var rss int64
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			require.NoError(t, err)
			rss = kb << 10
		}
	}
	fmt.Printf("MEM %d %d\n", EstimateMemory(cfg).Total, rss)
}

// TestValidatePSNSpan: the switch places packets by a signed 24-bit PSN
// distance, so a NetReduce job whose connections would carry 2^23 packets
// or more is refused, naming the fix; ring mode has no such limit.
func TestValidatePSNSpan(t *testing.T) {
	c := DefaultConfig()
	c.Workers, c.TensorBytes, c.MTU, c.MaxMemory = 2, 4<<30, 256, -1
	err := c.Validate()
	require.ErrorContains(t, err, "2^23")
	var ce *ConfigError
	require.ErrorAs(t, err, &ce)
	c.MTU = 1024
	require.NoError(t, c.Validate())
}

// A spoof's forgery enters a switch by host R's port, where port security
// drops it whatever job it forges (TestSpoofDroppedForEveryJob): it is
// valid in every mode, and refused where host R's first link ends at
// another host, which would take the forgery as its own.
func TestValidateSpoofNeedsASwitch(t *testing.T) {
	ev, err := faults.Parse("spoof=1 port=0 class=data nth=1")
	require.NoError(t, err)
	c := DefaultConfig()
	c.Workers, c.TensorBytes, c.Events = 2, 64<<10, []faults.Event{ev}
	require.NoError(t, c.Validate())
	c.Mode = Ring
	require.NoError(t, c.Validate())
	ring := mustTopo(t)(topo.Dims([]topo.Dim{{Size: 4, Kind: "ring", LinkParams: tenG()}}))
	c.Topology, c.Workers = ring, 4
	require.ErrorContains(t, c.Validate(), "spoof=1: h1's first link goes to h0, not to a switch")
}

// With port security off, a spoof is refused per job: allowed when the
// forged frames are a NetReduce job's (its ring connections are bound to
// their ports), refused when any job whose frames it copies is one no
// switch program checks, naming that job, whatever else the run holds.
func TestValidateSpoofPerJobWithPortsOpen(t *testing.T) {
	c := DefaultConfig()
	c.Workers, c.TensorBytes, c.OpenPorts = 6, 64<<10, true
	c.Jobs = []JobSpec{{Name: "a", Mode: NetReduce, Ranks: []string{"h0", "h1", "h2"}}, {Name: "c", Mode: Ring, Ranks: []string{"h3", "h4", "h5"}}}
	for spec, want := range map[string]string{
		"spoof=0 port=1 class=data nth=2": "",
		"spoof=0 port=4 class=data nth=2": "a forgery of job c's frames (ring mode)",
		"spoof=4 port=1 class=data nth=2": "",
	} {
		ev, err := faults.Parse(spec)
		require.NoError(t, err)
		c.Events = []faults.Event{ev}
		if want == "" {
			assert.NoError(t, c.Validate(), spec)
		} else {
			assert.ErrorContains(t, c.Validate(), want, spec)
		}
	}
	c.OpenPorts = false
	assert.NoError(t, c.Validate(), "port security drops it")
}

// A Config built in code with a nonsense worker count is refused, never
// sized by (--workers -1 panicked: makeslice: len out of range).
func TestValidateWorkersInRange(t *testing.T) {
	for _, n := range []int{-1, 0, 1 << 40} {
		c := DefaultConfig()
		c.Workers = n
		assert.ErrorContains(t, c.Validate(), fmt.Sprintf("--workers %d: want 1..", n))
	}
}

// With port security off, a NetReduce job's frames forged by a host under
// a switch that holds none of its ranks pass that switch as ordinary
// traffic and would be written: refused (found by FuzzRunAnyScenario:
// "rank 0 element 0 is -0.4995706, want 0.44086778").
func TestValidateSpoofEntersTheRingsSwitch(t *testing.T) {
	c := DefaultConfig()
	c.Topology = mustTopo(t)(topo.SpineLeaf(3, 1, 1, tenG(), tenG()))
	c.Workers, c.TensorBytes, c.OpenPorts = 2, 64<<10, true
	c.Jobs = []JobSpec{{Name: "j", Mode: NetReduce, Ranks: []string{"h1", "h2"}}}
	ev, err := faults.Parse("spoof=0 port=2 dir=in class=data nth=1")
	require.NoError(t, err)
	c.Events = []faults.Event{ev}
	assert.ErrorContains(t, c.Validate(), "a forgery of job j's frames entering leaf0, a switch that holds none of its ranks")
	ev, err = faults.Parse("spoof=1 port=2 dir=in class=data nth=1")
	require.NoError(t, err)
	c.Events = []faults.Event{ev}
	assert.NoError(t, c.Validate(), "leaf1 holds the ring: its accelerator drops the forgery")
	res, err := Run(c)
	require.NoError(t, err)
	assert.True(t, res.Exact)
	assert.Positive(t, netreduce.StatsOf(res.Switch).PortDrops)
}

// A one-job run is estimated as it runs, its mode resolved: fr is a ring
// over every GPU (the estimate of fr itself, which registers no memory of
// its own, would be the emulator's base only and let --max-memory pass
// anything), and a wa job counts its aggregator.
func TestEstimateOfOneJobIsItsResolvedJob(t *testing.T) {
	fr := DefaultConfig()
	fr.Mode, fr.Workers, fr.TensorBytes = FR, 4, 64<<20
	fr.Topology = parseTopo(t, "star:hosts=4,gpus=2,intra=150G")
	ring := fr
	ring.Mode, ring.Workers = Ring, 8
	assert.Equal(t, EstimateMemory(ring).Total, EstimateRunMemory(fr).Total, "fr: a ring of the 8 GPUs")

	wa := DefaultConfig()
	wa.Mode, wa.Workers, wa.TensorBytes = WA, 3, 16<<20
	four := wa
	four.Workers = 4 // three workers and the aggregator
	assert.Equal(t, EstimateMemory(four).Total, EstimateRunMemory(wa).Total, "wa: its aggregator is a rank")
}

// A job its switch program cannot hold is refused by Validate, naming the
// flag and the program, before anything runs; and a switch program given
// to a run with no job that aggregates in a switch is refused, not ignored.
func TestValidateSwitchProgramLimits(t *testing.T) {
	for _, c := range []struct {
		set  func(*Config)
		want string
	}{
		{func(c *Config) {}, "--msg-len 170: switch program ars takes messages of 1..128 packets"},
		{func(c *Config) { c.MsgLen, c.Window = 128, 3 }, "--window 3: switch program ars holds 1..2 messages in flight per worker"},
		{func(c *Config) { c.MsgLen, c.MTU = 128, 2048 }, "--mtu 2048: switch program ars takes 256..1024"},
		{func(c *Config) { c.MsgLen, c.Mode = 128, Ring }, "--switch-program ars: only jobs that aggregate in the switch"},
		{func(c *Config) { c.MsgLen, c.SwitchProgram = 128, "arz" }, `switch program "arz": want ars or netreduce (did you mean ars?)`},
	} {
		cfg := DefaultConfig()
		cfg.SwitchProgram, cfg.Workers, cfg.TensorBytes = "ars", 4, 1<<20
		c.set(&cfg)
		err := cfg.Validate()
		var ce *ConfigError
		require.ErrorAs(t, err, &ce)
		assert.Contains(t, err.Error(), c.want)
	}
	cfg := DefaultConfig()
	cfg.SwitchProgram, cfg.Workers, cfg.TensorBytes, cfg.MsgLen = "ars", 4, 1<<20, 128
	require.NoError(t, cfg.Validate(), "the paper's settings fit")
}
