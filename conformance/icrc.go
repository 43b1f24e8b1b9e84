package conformance

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"strings"

	"github.com/inaemu/inaemu/emu"
	"github.com/inaemu/inaemu/emu/netreduce"
	"github.com/inaemu/inaemu/emu/scenario"
	"github.com/inaemu/inaemu/frames"
	"github.com/inaemu/inaemu/internal/pcapio"
)

// ICRCSuite holds the checksum properties:
//   - every frame any component emits (NICs, the switch's rebuilt results,
//     ACKs, NAKs) verifies, on every transport;
//   - flipping any bit the ICRC covers and does not mask is detected;
//   - changing any masked field (docs/roce.md §2) keeps the ICRC valid;
//   - no aggregate is ever built from a corrupted frame.
func ICRCSuite(o SuiteOptions) []PropertyResult {
	if o.DUT != nil {
		const why = "a property of the frame format alone (inaemu's frames, no device takes part)"
		return []PropertyResult{emittedVerify(o), skipped("icrc/bit-flips-detected", why), skipped("icrc/masked-fields-keep-icrc", why), noAggregateFromCorruption(o)}
	}
	return []PropertyResult{emittedVerify(o), bitFlips(o), maskedFields(o), noAggregateFromCorruption(o)}
}

// captureOf runs sc with a capture and returns the capture's records.
func captureOf(o SuiteOptions, sc *scenario.Scenario) ([]pcapio.Record, *emu.Result, error) {
	recs, _, res, err := captureNamed(o, sc)
	return recs, res, err
}

// captureNamed is captureOf with the names of the capture's interfaces
// (the link directions: "port3-in" is host 3's link into the switch).
func captureNamed(o SuiteOptions, sc *scenario.Scenario) ([]pcapio.Record, []string, *emu.Result, error) {
	cfg := emu.DefaultConfig()
	if err := sc.Apply(&cfg); err != nil {
		return nil, nil, nil, err
	}
	var buf bytes.Buffer
	cfg.Capture = &buf
	res, err := o.runJob(cfg)
	var je *emu.JobError
	if err != nil && !errors.As(err, &je) {
		return nil, nil, nil, err
	}
	r, rerr := pcapio.NewReader("capture", &buf)
	if rerr != nil {
		return nil, nil, res, rerr
	}
	recs, names, _ := r.All()
	return recs, names, res, err
}

// readRecords reads a whole capture (the records before any damage: the
// captures read here are the runs' own).
func readRecords(in io.Reader) ([]pcapio.Record, error) {
	r, err := pcapio.NewReader("capture", in)
	if err != nil {
		return nil, err
	}
	recs, _, _ := r.All()
	return recs, nil
}

func ghostOrFaulted(r pcapio.Record) (ghost, corrupt bool) {
	for _, c := range r.Comments {
		corrupt = corrupt || strings.Contains(c, "corrupt")
	}
	return pcapio.IsGhost(r.Comments), corrupt
}

var transports = []string{"v2-ipv4", "v2-ipv6", "v1"}

// cleanCase is a generated job without corruption (other faults allowed),
// in either mode, on any transport.
func cleanCase(o SuiteOptions, seed uint64) *scenario.Scenario {
	c, cs := cleanAggCase(o, seed)
	return cs.scenario(c)
}

// cleanShape is what cleanCase draws beside its aggCase: the transport
// and the mode.
type cleanShape struct{ transport, mode string }

func (cs cleanShape) scenario(c aggCase) *scenario.Scenario {
	sc := c.scenario(0)
	sc.Transport = cs.transport
	if cs.mode == "ring" {
		sc.Mode, sc.SwitchProgram = "ring", "" // a ring job runs on no switch program
	}
	return sc
}

func cleanAggCase(o SuiteOptions, seed uint64) (aggCase, cleanShape) {
	c := sample(aggCaseGen(seed), seed).(aggCase) // on the star: the ICRC suites read its interface order
	c.fit(o)
	if o.DUT != nil {
		c = o.fitCase(c)
	}
	c.Workers = min(c.Workers, 6)
	c.Elems = max(min(c.Elems, 4096), c.Workers) // ring mode needs an element per worker
	var ev []string
	for _, e := range c.Events {
		// No corruption (this generator's point), no forgeries (ring mode
		// has no switch program to refuse them), no port beyond the job.
		if !strings.HasPrefix(e, "corrupt") && !strings.HasPrefix(e, "spoof") && portsFit([]string{e}, c.Workers) {
			ev = append(ev, e)
		}
	}
	c.Events, c.Netem = ev, ""
	r := rand.New(rand.NewPCG(seed, 1))
	cs := cleanShape{transport: transports[r.IntN(len(transports))], mode: "netreduce"}
	if r.IntN(2) == 1 || c.Ring {
		cs.mode = "ring"
	}
	return c, cs
}

// jobFailed is the outcome of a run that ended in err (not nil): against
// a device a transport failure with nothing to blame is inconclusive
// (see settle), with device evidence a failure (the device rules of
// device_judge.go for an aggregating job, then deviceEvidence); in the
// emulator any job failure is one (these cases' faults are bounded).
func jobFailed(o SuiteOptions, c aggCase, aggregating bool, recs []pcapio.Record, err error) aggOutcome {
	var je *emu.JobError
	switch {
	case !errors.As(err, &je):
		return aggOutcome{fail: "setup", detail: err.Error()}
	case o.DUT == nil:
		return aggOutcome{fail: "transport", detail: "the job failed: " + je.Msg}
	}
	if rule, detail := judgeDevice(recs, c); aggregating && rule != "" && rule != "unchecked" {
		return aggOutcome{fail: rule, detail: detail + "; the job failed too: " + je.Msg}
	}
	return blameDevice(c.Workers, recs, err, je)
}

func emittedVerify(o SuiteOptions) PropertyResult {
	name := "icrc/emitted-frames-verify"
	res := PropertyResult{Name: name, Passed: true}
	eachCase(o, name, &res, func(i int, seed uint64) bool {
		c, cs := cleanAggCase(o, seed)
		run := func(c aggCase) aggOutcome { return emittedOutcome(o, cs.scenario(c), c) }
		c, out := res.settled(i, c, run)
		if out.fail == "" {
			return true
		}
		shrink := func(c aggCase, out aggOutcome) (aggCase, aggOutcome) { return shrinkAgg(o, c, run, out) }
		reportShrunk(o, &res, i, c, out, shrink, cs.scenario, nil, fmt.Sprintf("icrc-emitted-%d", seed), o.rerun("--suite icrc", i))
		return false
	})
	res.noteInconclusive()
	return res
}

// emittedOutcome runs sc and judges every frame of its capture: each
// must carry a valid ICRC but those a fault corrupted.
func emittedOutcome(o SuiteOptions, sc *scenario.Scenario, c aggCase) aggOutcome {
	recs, _, err := captureOf(o, sc)
	if err != nil {
		return jobFailed(o, c, sc.Mode == "netreduce", recs, err)
	}
	var v frames.View
	for k, r := range recs {
		if ghost, _ := ghostOrFaulted(r); ghost {
			continue
		}
		if v.Parse(r.Data) == nil && !v.ICRCOK() {
			d := frames.Describe(k, r.Data)
			return aggOutcome{fail: "bad-icrc", detail: fmt.Sprintf("frame %d of the capture (%s) has a bad ICRC", k, d.Line())}
		}
	}
	return aggOutcome{}
}

// sampleFrames are RoCE frames of small clean runs on every transport.
func sampleFrames(o SuiteOptions, seed uint64) [][]byte {
	o = SuiteOptions{SwitchProgram: o.SwitchProgram} // the frames are inaemu's own
	var out [][]byte
	var v frames.View
	for k, t := range transports {
		sc := cleanCase(o, seed+uint64(k))
		sc.Transport, sc.Faults = t, nil
		recs, _, err := captureOf(o, sc)
		if err != nil {
			continue
		}
		for _, r := range recs {
			if v.Parse(r.Data) == nil {
				out = append(out, r.Data)
			}
		}
	}
	return out
}

// icrcEnd and the regions below are written from docs/roce.md §2, not taken
// from package frames: where the ICRC sits (the IP or GRH length says
// where the datagram ends; a runt is padded after it) and which bytes the
// ICRC covers (from the IP/GRH header on) and masks.
func icrcLayout(f []byte) (l3, end int, v6 bool, v1 bool) {
	l3 = 14
	switch binary.BigEndian.Uint16(f[12:]) {
	case 0x0800:
		return l3, l3 + int(binary.BigEndian.Uint16(f[l3+2:])), false, false
	case 0x86DD:
		return l3, l3 + 40 + int(binary.BigEndian.Uint16(f[l3+4:])), true, false
	default: // 0x8915 RoCEv1: GRH, then BTH; GRH payload length covers BTH..ICRC
		return l3, l3 + 40 + int(binary.BigEndian.Uint16(f[l3+4:])), true, true
	}
}

// maskedBit reports whether bit b of byte i is masked (so not protected).
func maskedBit(f []byte, i, b int) bool {
	l3, _, v6, v1 := icrcLayout(f)
	o := i - l3
	bth := l3 + 20 + 8
	if v6 {
		bth = l3 + 40 + 8
	}
	if v1 {
		bth = l3 + 40
	}
	if !v6 {
		switch {
		case o == 1 || o == 8 || o == 10 || o == 11: // TOS, TTL, checksum
			return true
		case o == 26 || o == 27: // UDP checksum
			return true
		}
	} else {
		switch {
		case o == 0 && b < 4, o >= 1 && o <= 3, o == 7: // traffic class, flow label, hop limit
			return true
		case !v1 && (o == 46 || o == 47):
			return true
		}
	}
	return i == bth+4 // FECN, BECN, resv6
}

// framePool is sampleFrames(seed); with none, res fails saying so.
func framePool(o SuiteOptions, res *PropertyResult, seed uint64) ([][]byte, bool) {
	pool := sampleFrames(o, seed)
	if len(pool) == 0 {
		o.record(res)
		res.Passed, res.Failure = false, "no frames to test"
	}
	return pool, len(pool) > 0
}

func bitFlips(o SuiteOptions) PropertyResult {
	name := "icrc/bit-flips-detected"
	res := PropertyResult{Name: name, Passed: true}
	pool, ok := framePool(o, &res, o.Seed)
	if !ok {
		return res
	}
	eachCase(o, name, &res, func(i int, seed uint64) bool {
		r := rand.New(rand.NewPCG(seed, 2))
		f := append([]byte(nil), pool[r.IntN(len(pool))]...)
		l3, end, _, _ := icrcLayout(f)
		var at, bit int
		for {
			at, bit = l3+r.IntN(end-4-l3), r.IntN(8)
			if !maskedBit(f, at, bit) {
				break
			}
		}
		f[at] ^= 1 << bit
		if ok, err := frames.VerifyICRC(f); err == nil && ok {
			res.Failure = fmt.Sprintf("flipping bit %d of byte %d was not detected: % x", bit, at, f)
			return false
		}
		return true
	})
	return res
}

func maskedFields(o SuiteOptions) PropertyResult {
	name := "icrc/masked-fields-keep-icrc"
	res := PropertyResult{Name: name, Passed: true}
	pool, ok := framePool(o, &res, o.Seed+7)
	if !ok {
		return res
	}
	eachCase(o, name, &res, func(i int, seed uint64) bool {
		r := rand.New(rand.NewPCG(seed, 3))
		f := append([]byte(nil), pool[r.IntN(len(pool))]...)
		l3, end, _, _ := icrcLayout(f)
		for at := l3; at < end-4; at++ {
			for b := 0; b < 8; b++ {
				if maskedBit(f, at, b) && r.IntN(2) == 1 {
					f[at] ^= 1 << b
				}
			}
		}
		if ok, err := frames.VerifyICRC(f); err != nil || !ok {
			res.Failure = fmt.Sprintf("changing only masked fields broke the ICRC (%v): % x", err, f)
			return false
		}
		return true
	})
	return res
}

// noAggregateFromCorruption: NetReduce jobs whose gradient frames are
// corrupted on the way into the switch, under the safe release rule (the
// release rule is the aggregation suite's subject). Every corrupted
// gradient frame that reached the switch must be an ICRC drop there (so
// none was aggregated) — unless the flipped bit made it ordinary traffic
// (e.g. a different QPN or opcode), in which case the switch forwards it
// byte for byte and the receiving NIC drops it for its ICRC — and the job
// must still end exact. A failing case is shrunk like the aggregation
// suite's and said in words.
func noAggregateFromCorruption(o SuiteOptions) PropertyResult {
	name := "icrc/no-aggregate-from-corruption"
	res := PropertyResult{Name: name, Passed: true}
	run := func(c aggCase) aggOutcome { return corruptionOutcome(o, c) }
	eachCase(o, name, &res, func(i int, seed uint64) bool {
		c := sample(aggCaseGen(seed), seed).(aggCase) // on the star: even interfaces are the hosts' links into the switch
		c.fit(o)
		c.Workers, c.Elems, c.Netem = min(c.Workers, 6), min(c.Elems, 4096), ""
		if o.DUT != nil {
			c = o.fitCase(c)
		}
		r := rand.New(rand.NewPCG(seed, 4))
		c.Events = nil
		for k, n := 0, 1+r.IntN(4); k < n; k++ {
			c.Events = append(c.Events, fmt.Sprintf("corrupt port=%d dir=in class=data nth=%d", r.IntN(c.Workers), 1+r.IntN(40)))
		}
		c, out := res.settled(i, c, run)
		if out.fail == "" {
			return true
		}
		shrink := func(c aggCase, out aggOutcome) (aggCase, aggOutcome) { return shrinkAgg(o, c, run, out) }
		scenarioOf := func(c aggCase) *scenario.Scenario { return c.scenario(netreduce.Safe) } // the release rule is the aggregation suite's business
		reportShrunk(o, &res, i, c, out, shrink, scenarioOf, nil, fmt.Sprintf("icrc-corrupt-%d", seed), o.rerun("--suite icrc", i))
		return false
	})
	res.noteInconclusive()
	return res
}

// corruptionOutcome runs a case of noAggregateFromCorruption and judges
// it.
func corruptionOutcome(o SuiteOptions, c aggCase) aggOutcome {
	recs, out, err := captureOf(o, c.scenario(netreduce.Safe))
	corrupted, forwarded := 0, 0
	for k, rec := range recs {
		if ghost, bad := ghostOrFaulted(rec); bad && !ghost && rec.Info.InterfaceIndex%2 == 0 { // portR-in
			corrupted++
			for _, later := range recs[k+1:] {
				if later.Info.InterfaceIndex%2 == 1 && bytes.Equal(later.Data, rec.Data) {
					forwarded++
					break
				}
			}
		}
	}
	switch {
	case err != nil:
		return jobFailed(o, c, !c.Ring, recs, err)
	case !out.Exact:
		return wrongResult(out.Mismatch)
	case o.DUT != nil:
		// A device's drop counters are its own: an exact result is the
		// verdict (a corrupted contribution would change the sum).
	case icrcDrops(out) != uint64(corrupted-forwarded):
		return aggOutcome{fail: "icrc-drops", detail: fmt.Sprintf("%d corrupted gradient frames reached the switch (%d forwarded unchanged as ordinary traffic) but it dropped %d for their ICRC",
			corrupted, forwarded, icrcDrops(out))}
	}
	return aggOutcome{}
}
