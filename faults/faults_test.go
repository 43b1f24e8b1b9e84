package faults_test

import (
	"math"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/inaemu/inaemu/faults"
	"github.com/inaemu/inaemu/frames"
	"github.com/inaemu/inaemu/frames/wire"
)

func TestParseEvent(t *testing.T) {
	ev, err := faults.Parse("drop port=0 dir=out class=data nth=1")
	require.NoError(t, err)
	assert.Equal(t, faults.Event{Action: faults.ActDrop, Port: 0, Dir: faults.DirOut, Class: faults.ClassData, QP: -1, PSN: -1,
		Nth: 1, Prob: 1, Spec: "drop port=0 dir=out class=data nth=1"}, ev)

	ev, err = faults.Parse("delay=20us qp=0x11 psn=5 every=3 prob=50%")
	require.NoError(t, err)
	assert.Equal(t, faults.ActDelay, ev.Action)
	assert.Equal(t, 20*time.Microsecond, ev.Delay)
	assert.Equal(t, int64(0x11), ev.QP)
	assert.Equal(t, int64(5), ev.PSN)
	assert.Equal(t, 3, ev.Every)
	assert.Equal(t, 0.5, ev.Prob)
	assert.Equal(t, -1, ev.Port)

	ev, err = faults.Parse("hold=3 class=nak dir=in")
	require.NoError(t, err)
	assert.Equal(t, faults.Event{Action: faults.ActHold, Hold: 3, Port: -1, Dir: faults.DirIn, Class: faults.ClassNAK, QP: -1, PSN: -1, Prob: 1, Spec: "hold=3 class=nak dir=in"}, ev)

	for spec, tok := range map[string]string{
		"":                       "empty",
		"explode port=1":         `"explode"`,
		"drop prt=0":             `"prt=0"`,
		"drop port=x":            `"port=x"`,
		"drop dir=up":            `"dir=up"`,
		"drop class=video":       `"class=video"`,
		"drop nth=0":             `"nth=0"`,
		"drop psn=16777216":      `"psn=16777216"`,
		"drop prob=150%":         `"prob=150%"`,
		"drop port":              `"port"`,
		"drop port=1 port=2":     `"port=2"`,
		"delay=soon":             `"delay=soon"`,
		"hold=0":                 `"hold=0"`,
		"drop=3":                 `"drop=3"`,
		"corrupt class=data qp=": `"qp="`,
	} {
		_, err := faults.Parse(spec)
		require.Error(t, err, spec)
		assert.Contains(t, err.Error(), tok, spec)
	}
}

// Every value out of its range is refused, in one line naming the value
// and the range: percentages (netem's, gemodel's optional r, 1-h and 1-k
// among them, which had read 200% as 0), prob= (a percentage: a bare
// number, which reads as a probability too, had been taken as percent),
// counts (hold and gap had no upper bound) and durations.
func TestRangeRefusals(t *testing.T) {
	for _, c := range []struct{ spec, err string }{
		{"loss gemodel 1% 200%", `netem "loss gemodel 1% 200%": bad token "200%": "200%" is not a percentage from 0 to 100`},
		{"loss gemodel 1% 30% 101", `netem "loss gemodel 1% 30% 101": bad token "101": "101" is not a percentage from 0 to 100`},
		{"loss gemodel 1% 30% 70% NaN", `netem "loss gemodel 1% 30% 70% NaN": bad token "NaN": "NaN" is not a percentage from 0 to 100`},
		{"loss gemodel 1% 30% 70% 0.1% delay 5us", ""},
		{"loss gemodel -1%", `netem "loss gemodel -1%": bad token "-1%": "-1%" is not a percentage from 0 to 100`},
		{"duplicate 100.5%", `netem "duplicate 100.5%": bad token "100.5%": "100.5%" is not a percentage from 0 to 100`},
		{"corrupt -0.1", `netem "corrupt -0.1": bad token "-0.1": "-0.1" is not a percentage from 0 to 100`},
		{"reorder 150% gap 5", `netem "reorder 150% gap 5": bad token "150%": "150%" is not a percentage from 0 to 100`},
		{"reorder 5% gap 9999999999", `netem "reorder 5% gap 9999999999": bad token "9999999999": gap must be a whole number of frames from 1 to 2147483648`},
		{"delay -5us", `netem "delay -5us": bad token "-5us": "-5us" is not a duration from 0 to 1h (e.g. 10us, 2ms; a bare number is nanoseconds, as netem reads it)`},
		{"delay 5us 2h", `netem "delay 5us 2h": bad token "2h": "2h" is beyond the 1h limit for durations`},
		{"drop prob=2", `fault "drop prob=2": bad token "prob=2": prob is a percentage from 0% to 100% written with its % sign, e.g. prob=2%: a bare 2 reads as a probability to some and as a percentage to others`},
		{"drop prob=0.5", `fault "drop prob=0.5": bad token "prob=0.5": prob is a percentage from 0% to 100% written with its % sign, e.g. prob=0.5%: a bare 0.5 reads as a probability to some and as a percentage to others`},
		{"drop prob=200", `fault "drop prob=200": bad token "prob=200": "200" is not a percentage from 0 to 100`},
		{"drop prob=101%", `fault "drop prob=101%": bad token "prob=101%": "101%" is not a percentage from 0 to 100`},
		{"drop prob=-1%", `fault "drop prob=-1%": bad token "prob=-1%": "-1%" is not a percentage from 0 to 100`},
		{"drop prob=0", ""},
		{"drop prob=100%", ""},
		{"hold=99999999999", `fault "hold=99999999999": bad token "hold=99999999999": hold needs a frame count from 1 to 2147483648, e.g. hold=3`},
		{"hold=2147483649", `fault "hold=2147483649": bad token "hold=2147483649": hold needs a frame count from 1 to 2147483648, e.g. hold=3`},
		{"hold=2147483648", ""},
		{"drop nth=2147483649", `fault "drop nth=2147483649": bad token "nth=2147483649": nth must be a whole number from 1 to 2147483648`},
		{"drop every=0", `fault "drop every=0": bad token "every=0": every must be a whole number from 1 to 2147483648`},
		{"spoof=65537 port=1", `fault "spoof=65537 port=1": bad token "spoof=65537": spoof needs the switch port the forgery enters by, from 0 to 65536, e.g. spoof=2`},
		{"delay=0", `fault "delay=0": bad token "delay=0": delay needs a positive duration, above 0 and up to 1h, e.g. delay=20us`},
		{"delay=-1us", `fault "delay=-1us": bad token "delay=-1us": delay needs a positive duration, above 0 and up to 1h, e.g. delay=20us`},
		{"delay=61m", `fault "delay=61m": bad token "delay=61m": "61m" is beyond the 1h limit for durations`},
	} {
		var err error
		if strings.Contains(c.spec, "=") {
			_, err = faults.Parse(c.spec)
		} else {
			_, err = faults.ParseNetem(c.spec)
		}
		if c.err == "" {
			assert.NoError(t, err, c.spec)
			continue
		}
		assert.EqualError(t, err, c.err, c.spec)
	}
	// Accepted values keep their meaning.
	n, err := faults.ParseNetem("loss gemodel 1% 100% 0 100")
	require.NoError(t, err)
	assert.Equal(t, &faults.GEModel{P: 0.01, R: 1, OneMinusH: 0, OneMinusK: 1}, n.GE)
	ev, err := faults.Parse("drop prob=2%")
	require.NoError(t, err)
	assert.InDelta(t, 0.02, ev.Prob, 1e-12)
}

func TestParseNetem(t *testing.T) {
	n, err := faults.ParseNetem("loss 1% delay 10us 2us reorder 25% gap 5 duplicate 0.5 corrupt 0.1%")
	require.NoError(t, err)
	assert.InDelta(t, 0.01, n.Loss, 1e-12)
	assert.Equal(t, 10*time.Microsecond, n.Delay)
	assert.Equal(t, 2*time.Microsecond, n.Jitter)
	assert.InDelta(t, 0.25, n.Reorder, 1e-12)
	assert.Equal(t, 5, n.Gap)
	assert.InDelta(t, 0.005, n.Duplicate, 1e-12, "a bare number is a percentage, as in tc")
	assert.InDelta(t, 0.001, n.Corrupt, 1e-12)

	n, err = faults.ParseNetem("loss gemodel 2%")
	require.NoError(t, err)
	assert.Equal(t, &faults.GEModel{P: 0.02, R: 0.98, OneMinusH: 1, OneMinusK: 0}, n.GE, "netem defaults: r = 1-p, 1-h = 100%, 1-k = 0")
	n, err = faults.ParseNetem("loss gemodel 1% 30% 70% 0.1%")
	require.NoError(t, err)
	assert.InDeltaSlice(t, []float64{0.01, 0.3, 0.7, 0.001}, []float64{n.GE.P, n.GE.R, n.GE.OneMinusH, n.GE.OneMinusK}, 1e-12)
	n, err = faults.ParseNetem("delay 5")
	require.NoError(t, err)
	assert.Equal(t, 5*time.Nanosecond, n.Delay, "a bare delay is nanoseconds, as tc's get_time64 reads netem's delay (duration.go)")

	for spec, tok := range map[string]string{
		"loss":             "end of input",
		"loss 101%":        `"101%"`,
		"jitter 5us":       `"jitter"`,
		"reorder 5% gap":   "end of input",
		"reorder 5% gap 0": `"0"`,
		"delay fast":       `"fast"`,
	} {
		_, err := faults.ParseNetem(spec)
		require.Error(t, err, spec)
		assert.Contains(t, err.Error(), tok, spec)
	}
}

// traffic builds RoCE frames of each class from one connection.
type traffic struct {
	t   *testing.T
	req *frames.Builder
	rsp *frames.Builder
	buf []byte
}

func newTraffic(t *testing.T) *traffic {
	a, b := net.HardwareAddr{2, 0, 0, 0, 0, 1}, net.HardwareAddr{2, 0, 0, 0, 0, 2}
	ipA, ipB := netip.MustParseAddr("10.0.0.1"), netip.MustParseAddr("10.0.0.2")
	req, err := frames.NewBuilder(frames.Path{Transport: frames.V2IPv4, SrcMAC: a, DstMAC: b, SrcIP: ipA, DstIP: ipB, DestQP: 0x22})
	require.NoError(t, err)
	rsp, err := frames.NewBuilder(frames.Path{Transport: frames.V2IPv4, SrcMAC: b, DstMAC: a, SrcIP: ipB, DstIP: ipA, DestQP: 0x11})
	require.NoError(t, err)
	return &traffic{t: t, req: req, rsp: rsp, buf: make([]byte, 2048)}
}

func (tr *traffic) data(psn uint32) []byte {
	n, err := tr.req.Build(tr.buf, &frames.Packet{Opcode: wire.WriteMiddle, PSN: psn, Payload: make([]byte, 256)})
	require.NoError(tr.t, err)
	return append([]byte(nil), tr.buf[:n]...)
}

func (tr *traffic) ack(psn uint32, syn wire.Syndrome) []byte {
	n, err := tr.rsp.Build(tr.buf, &frames.Packet{Opcode: wire.Acknowledge, PSN: psn, AETH: frames.AETHFields{Syndrome: syn}})
	require.NoError(tr.t, err)
	return append([]byte(nil), tr.buf[:n]...)
}

type out struct {
	psn   uint32
	delay time.Duration
	note  faults.Note
	ok    bool // ICRC still valid
}

func run(st *faults.Stage, in [][]byte) []out {
	var got []out
	emit := func(f []byte, d time.Duration, n faults.Note, _ *faults.Event) {
		var v frames.View
		if v.Parse(f) != nil {
			got = append(got, out{psn: 1 << 30, delay: d, note: n})
			return
		}
		got = append(got, out{psn: v.PSN(), delay: d, note: n, ok: v.ICRCOK()})
	}
	for _, f := range in {
		st.Process(f, emit)
	}
	st.Flush(emit)
	return got
}

func psnsOf(o []out) []uint32 {
	var p []uint32
	for _, x := range o {
		p = append(p, x.psn)
	}
	return p
}

func mustEvents(t *testing.T, specs ...string) []faults.Event {
	var evs []faults.Event
	for _, s := range specs {
		ev, err := faults.Parse(s)
		require.NoError(t, err)
		evs = append(evs, ev)
	}
	return evs
}

func TestDeterministicEvents(t *testing.T) {
	tr := newTraffic(t)
	mixed := [][]byte{tr.data(1), tr.ack(1, wire.SyndromeACK), tr.data(2), tr.ack(2, wire.SyndromeNAKPSNSeqErr), tr.data(3), tr.data(4)}
	for _, c := range []struct {
		name  string
		specs []string
		port  int
		dir   faults.Dir
		want  []uint32
	}{
		{"issue example: first data frame to rank 0", []string{"drop port=0 dir=out class=data nth=1"}, 0, faults.DirOut, []uint32{1, 2, 2, 3, 4}},
		{"other port untouched", []string{"drop port=0 dir=out class=data nth=1"}, 1, faults.DirOut, []uint32{1, 1, 2, 2, 3, 4}},
		{"other direction untouched", []string{"drop port=0 dir=out class=data nth=1"}, 0, faults.DirIn, []uint32{1, 1, 2, 2, 3, 4}},
		{"class nak", []string{"drop class=nak"}, 0, faults.DirIn, []uint32{1, 1, 2, 3, 4}},
		{"class ack is not nak", []string{"drop class=ack"}, 0, faults.DirIn, []uint32{1, 2, 2, 3, 4}},
		{"psn", []string{"drop class=data psn=3"}, 0, faults.DirIn, []uint32{1, 1, 2, 2, 4}},
		{"every 2nd data frame", []string{"drop class=data every=2"}, 0, faults.DirIn, []uint32{1, 1, 2, 3}},
		{"nth with every: 2nd, 4th", []string{"drop class=data nth=2 every=2"}, 0, faults.DirIn, []uint32{1, 1, 2, 3}},
		{"qp", []string{"drop qp=0x11"}, 0, faults.DirIn, []uint32{1, 2, 3, 4}},
		{"dup", []string{"dup class=data psn=2"}, 0, faults.DirIn, []uint32{1, 1, 2, 2, 2, 3, 4}},
		{"hold=2 releases after two later frames", []string{"hold=2 class=data psn=1"}, 0, faults.DirIn, []uint32{1, 2, 1, 2, 3, 4}},
		{"prob=0 never fires", []string{"drop prob=0"}, 0, faults.DirIn, []uint32{1, 1, 2, 2, 3, 4}},
	} {
		t.Run(c.name, func(t *testing.T) {
			st := faults.NewStage(c.port, c.dir, faults.Netem{}, mustEvents(t, c.specs...), 1)
			in := make([][]byte, len(mixed))
			for i, f := range mixed {
				in[i] = append([]byte(nil), f...)
			}
			assert.Equal(t, c.want, psnsOf(run(st, in)))
		})
	}
}

func TestCorruptAndDelayEvents(t *testing.T) {
	tr := newTraffic(t)
	st := faults.NewStage(0, faults.DirIn, faults.Netem{}, mustEvents(t, "corrupt class=data nth=1", "delay=30us class=ack"), 7)
	got := run(st, [][]byte{tr.data(1), tr.data(2), tr.ack(2, wire.SyndromeACK)})
	require.Len(t, got, 3)
	assert.False(t, got[0].ok, "a corrupt event always breaks the ICRC")
	assert.Equal(t, faults.NoteCorrupt, got[0].note)
	assert.True(t, got[1].ok)
	assert.Equal(t, 30*time.Microsecond, got[2].delay)
	assert.Equal(t, faults.NoteDelay, got[2].note)
	// Every corrupt event, on any frame, is detectable.
	for seed := uint64(0); seed < 500; seed++ {
		st := faults.NewStage(0, faults.DirIn, faults.Netem{}, mustEvents(t, "corrupt"), seed)
		g := run(st, [][]byte{tr.data(9), tr.ack(9, wire.SyndromeACK)})
		require.Len(t, g, 2)
		assert.False(t, g[0].ok || g[1].ok, "seed %d", seed)
	}
}

// TestNetemRates: the random impairments hit at their configured rates
// (within 4 standard deviations over 200k frames, for the fixed seed).
func TestNetemRates(t *testing.T) {
	tr := newTraffic(t)
	frame := tr.data(1)
	const n = 200000
	within := func(name string, got uint64, p float64) {
		sd := math.Sqrt(n * p * (1 - p))
		assert.InDelta(t, n*p, float64(got), 4*sd+1, "%s: %d of %d, want about %.0f", name, got, n, n*p)
	}
	st := faults.NewStage(0, faults.DirIn, faults.Netem{Loss: 0.01, Duplicate: 0.02, Corrupt: 0.005}, nil, 42)
	for i := 0; i < n; i++ {
		st.Process(append([]byte(nil), frame...), func([]byte, time.Duration, faults.Note, *faults.Event) {})
	}
	within("loss", st.Stats.Lost, 0.01)
	within("duplicate", st.Stats.Duplicated, 0.02*0.99)
	within("corrupt", st.Stats.Corrupted, 0.005*0.99)

	// Gilbert-Elliott: long-run loss p/(p+r)·(1-h) + r/(p+r)·(1-k), in bursts.
	ge := faults.GEModel{P: 0.01, R: 0.2, OneMinusH: 0.8, OneMinusK: 0.001}
	st = faults.NewStage(0, faults.DirIn, faults.Netem{GE: &ge}, nil, 43)
	var lost []bool
	for i := 0; i < n; i++ {
		got := false
		st.Process(frame, func([]byte, time.Duration, faults.Note, *faults.Event) { got = true })
		lost = append(lost, !got)
	}
	bad := ge.P / (ge.P + ge.R)
	mean := bad*ge.OneMinusH + (1-bad)*ge.OneMinusK
	assert.InDelta(t, mean, float64(st.Stats.Lost)/n, 0.15*mean, "GE mean loss")
	pairs, both := 0, 0
	for i := 1; i < n; i++ {
		if lost[i-1] {
			pairs++
			if lost[i] {
				both++
			}
		}
	}
	assert.Greater(t, float64(both)/float64(pairs), 5*mean, "losses come in bursts: P(loss | loss) far above the mean")
}

func TestNetemDelayAndReorder(t *testing.T) {
	tr := newTraffic(t)
	st := faults.NewStage(0, faults.DirIn, faults.Netem{Delay: 100 * time.Microsecond, Jitter: 10 * time.Microsecond}, nil, 5)
	var sum, sumSq float64
	const n = 20000
	for i := 0; i < n; i++ {
		st.Process(tr.data(1), func(_ []byte, d time.Duration, _ faults.Note, _ *faults.Event) {
			x := float64(d) / float64(time.Microsecond)
			sum += x
			sumSq += x * x
		})
	}
	mean := sum / n
	assert.InDelta(t, 100, mean, 0.5)
	assert.InDelta(t, 10, math.Sqrt(sumSq/n-mean*mean), 0.5)

	// reorder 25% gap 4: frames 4, 8, ... may skip the delay, each with p=25%.
	st = faults.NewStage(0, faults.DirIn, faults.Netem{Delay: time.Millisecond, Reorder: 0.25, Gap: 4}, nil, 6)
	reordered := 0
	counter := 0
	for i := 0; i < n; i++ {
		st.Process(tr.data(1), func(_ []byte, d time.Duration, note faults.Note, _ *faults.Event) {
			if note&faults.NoteReorder != 0 {
				assert.Zero(t, d)
				assert.GreaterOrEqual(t, counter, 3, "at least gap-1 frames between reorders")
				reordered++
				counter = 0
			} else {
				assert.Equal(t, time.Millisecond, d)
				counter++
			}
		})
	}
	assert.Greater(t, reordered, n/4*25/100*8/10)

	// With no delay, a reordered frame swaps with the next one.
	st = faults.NewStage(0, faults.DirIn, faults.Netem{Reorder: 1, Gap: 2}, nil, 7)
	assert.Equal(t, []uint32{1, 3, 2, 5, 4, 6}, psnsOf(run(st, [][]byte{tr.data(1), tr.data(2), tr.data(3), tr.data(4), tr.data(5), tr.data(6)})))
}

// TestSeedReproducible: the same seed gives the same decisions; another
// seed does not.
func TestSeedReproducible(t *testing.T) {
	tr := newTraffic(t)
	trace := func(seed uint64) []out {
		st := faults.NewStage(3, faults.DirOut, faults.Netem{Loss: 0.1, Duplicate: 0.1, Corrupt: 0.1, Delay: time.Microsecond, Jitter: time.Microsecond, Reorder: 0.2},
			mustEvents(t, "hold=2 prob=10%"), faults.StageSeed(seed, 3, faults.DirOut))
		var in [][]byte
		for i := uint32(0); i < 300; i++ {
			in = append(in, tr.data(i))
		}
		return run(st, in)
	}
	assert.Equal(t, trace(1), trace(1))
	assert.NotEqual(t, trace(1), trace(2))
	assert.NotEqual(t, faults.StageSeed(1, 0, faults.DirIn), faults.StageSeed(1, 0, faults.DirOut))
	assert.NotEqual(t, faults.StageSeed(1, 0, faults.DirIn), faults.StageSeed(1, 1, faults.DirIn))
}

func TestStageAllocatesNothing(t *testing.T) {
	tr := newTraffic(t)
	st := faults.NewStage(0, faults.DirIn, faults.Netem{Loss: 0.05, Duplicate: 0.05, Corrupt: 0.01, Delay: time.Microsecond, Jitter: time.Microsecond, Reorder: 0.1},
		mustEvents(t, "hold=3 every=7", "dup every=11"), 9)
	frame := tr.data(5)
	buf := make([]byte, len(frame))
	emit := func([]byte, time.Duration, faults.Note, *faults.Event) {}
	for i := 0; i < 1000; i++ { // warm the hold pool
		copy(buf, frame)
		st.Process(buf, emit)
	}
	assert.Zero(t, testing.AllocsPerRun(1000, func() {
		copy(buf, frame)
		st.Process(buf, emit)
	}))
}

// TestSpoofEvent: spoof=R parses only for frames going into the switch
// and from another port; the stage hands OnSpoof a forged copy whose
// payload differs in one bit and whose ICRC is valid again, and lets the
// original through untouched.
func TestSpoofEvent(t *testing.T) {
	ev, err := faults.Parse("spoof=2 port=1 class=data nth=1")
	require.NoError(t, err)
	assert.Equal(t, faults.ActSpoof, ev.Action)
	assert.Equal(t, 2, ev.From)
	assert.Equal(t, faults.DirIn, ev.Dir)
	for _, bad := range []string{"spoof port=1", "spoof=x", "spoof=1 port=1", "spoof=2 port=1 dir=out", "spoof=-1", "spoof=1 class=data nth=1"} {
		_, err := faults.Parse(bad)
		assert.Error(t, err, bad)
	}
	b, err := frames.NewBuilder(frames.Path{Transport: frames.V2IPv4, SrcMAC: net.HardwareAddr{2, 0, 0, 0, 0, 1},
		DstMAC: net.HardwareAddr{2, 0, 0, 0, 0, 2}, SrcIP: netip.MustParseAddr("10.0.0.1"), DstIP: netip.MustParseAddr("10.0.0.2"), DestQP: 0x12})
	require.NoError(t, err)
	buf := make([]byte, 2048)
	n, err := b.Build(buf, &frames.Packet{Opcode: wire.WriteOnly, PSN: 7, Payload: []byte{1, 2, 3, 4, 5, 6, 7, 8}})
	require.NoError(t, err)
	orig := append([]byte(nil), buf[:n]...)
	st := faults.NewStage(1, faults.DirIn, faults.Netem{}, []faults.Event{ev}, 1)
	var forged []byte
	from := -1
	st.OnSpoof = func(f []byte, port int, _ *faults.Event) { forged, from = append([]byte(nil), f...), port }
	var out [][]byte
	st.Process(buf[:n], func(f []byte, _ time.Duration, _ faults.Note, _ *faults.Event) {
		out = append(out, append([]byte(nil), f...))
	})
	require.Len(t, out, 1)
	assert.Equal(t, orig, out[0], "the original passes unchanged")
	assert.Equal(t, 2, from)
	require.Len(t, forged, len(orig))
	diff := 0
	for i := range orig {
		if orig[i] != forged[i] {
			diff++
		}
	}
	var v frames.View
	require.NoError(t, v.Parse(forged))
	assert.True(t, v.ICRCOK(), "the forgery carries a valid ICRC")
	assert.NotEqual(t, orig[len(orig)-4-1-3:len(orig)-4], forged[len(forged)-4-1-3:len(forged)-4], "its payload differs")
	assert.LessOrEqual(t, diff, 5, "one payload byte and the ICRC")
	assert.Equal(t, uint64(1), st.Stats.Spoofed)
}

// link= names one link direction: the stage of that name fires, a stage
// of another name (even on the same host port and direction) does not,
// and link= refuses port=, dir= and spoof.
func TestLinkEvents(t *testing.T) {
	tr := newTraffic(t)
	mixed := [][]byte{tr.data(1), tr.ack(1, wire.SyndromeACK), tr.data(2), tr.ack(2, wire.SyndromeNAKPSNSeqErr), tr.data(3), tr.data(4)}
	evs := mustEvents(t, "drop link=leaf0-spine0 class=data psn=2")
	for _, c := range []struct {
		link string
		port int
		dir  faults.Dir
		want []uint32
	}{
		{"leaf0-spine0", -1, faults.DirAny, []uint32{1, 1, 2, 3, 4}},
		{"spine0-leaf0", -1, faults.DirAny, []uint32{1, 1, 2, 2, 3, 4}},
		{"h0-leaf0", 0, faults.DirIn, []uint32{1, 1, 2, 2, 3, 4}},
	} {
		st := faults.NewLinkStage(c.link, c.port, c.dir, faults.Netem{}, evs, 1)
		in := make([][]byte, len(mixed))
		for i, f := range mixed {
			in[i] = append([]byte(nil), f...)
		}
		assert.Equal(t, c.want, psnsOf(run(st, in)), c.link)
	}
	// port/dir events still reach a named host link by its port.
	st := faults.NewLinkStage("h0-leaf0", 0, faults.DirIn, faults.Netem{}, mustEvents(t, "drop port=0 dir=in class=data psn=2"), 1)
	in := make([][]byte, len(mixed))
	for i, f := range mixed {
		in[i] = append([]byte(nil), f...)
	}
	assert.Equal(t, []uint32{1, 1, 2, 3, 4}, psnsOf(run(st, in)))
	for _, bad := range []string{"drop link=", "drop link=a-b port=1", "drop link=a-b dir=in", "spoof=1 link=a-b"} {
		_, err := faults.Parse(bad)
		assert.Error(t, err, bad)
	}
}
