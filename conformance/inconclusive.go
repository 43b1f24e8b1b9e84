package conformance

import (
	"errors"
	"fmt"

	"github.com/inaemu/inaemu/dut"
	"github.com/inaemu/inaemu/emu"
	"github.com/inaemu/inaemu/frames"
	"github.com/inaemu/inaemu/frames/wire"
	"github.com/inaemu/inaemu/internal/pcapio"
)

// Inconclusive cases. Against a device, a job that fails in its transport
// (retries run out, a stall) with no injected fault to explain it may be
// the device's doing or the machine's: a loaded machine's queues can hold
// a window past the ACK timeout with nothing lost. So such a failure
// fails the property only with evidence against the device (a rule of
// the device's frames broken, deviceEvidence) or a wrong result (always a
// failure). Without either, the case is inconclusive: it is run once
// more with a timeout four times as long (inconclusiveRetry); if that
// fails the same way too, it is counted as inconclusive (the property's
// Inconclusive and a note), never reported as the device's failure. A
// wrong result or device evidence in the rerun is a failure like any.

// inconclusiveRetry is how many exponents the rerun of an inconclusive
// case raises its ACK timeout by (×4), its delay events scaled alike.
const inconclusiveRetry = 2

// deviceEvidence names what the device did wrong in a run that failed
// with err, from the wire's capture recs, or "": the stall detector's
// finding (a device silent while every rank sent into it) and the device
// rules of go-back-N (deviceGBN: responses forged or lost, data forged).
func deviceEvidence(workers int, recs []pcapio.Record, err error) (ev string, silentOnly bool) {
	if len(recs) > 0 {
		if ev := deviceEmitted(workers, recs); ev != "" {
			return ev, false
		}
		if ev := deviceGBN(workers, recs); ev != "" {
			return ev, false
		}
	}
	if se := (*dut.StallError)(nil); errors.As(err, &se) {
		if ev := se.Evidence(); ev != "" {
			return ev, true
		}
	}
	return "", false
}

// blameDevice is the outcome of a job against a device that failed in
// its transport (je) with no injected fault to explain it: a failure
// with the device's evidence, else inconclusive. A device that only went
// silent is blamed too, but settle confirms it once first: a device
// process starved of the CPU on a loaded machine is silent for a while
// as well, and a device that is really mute is mute again.
func blameDevice(workers int, recs []pcapio.Record, err error, je *emu.JobError) aggOutcome {
	if ev, silent := deviceEvidence(workers, recs, err); ev != "" {
		return aggOutcome{fail: "transport", detail: "the job failed (" + je.Msg + "), and the device is to blame: " + ev, silent: silent}
	}
	return aggOutcome{inconclusive: true, detail: "the job failed with no fault to explain it and no evidence against the device: " + je.Msg}
}

// deviceEmitted checks two things every frame the device sends owes, from
// the wire's capture (interfaces 4p+2: what reached the device by port p,
// 4p+3: what it sent out of port p):
//
//   - bad-icrc: a RoCE frame it sent carries a valid ICRC, unless it is a
//     frame that reached it byte for byte (a forwarding device passes on
//     a frame the wire corrupted);
//   - misdelivered: a RoCE frame addressed to rank X (by destination MAC)
//     that it sent out of another port is sent out of port X too, at some
//     time of the run (flooding is allowed; a result that reaches only
//     the wrong host is not).
func deviceEmitted(workers int, recs []pcapio.Record) string {
	rankOf := map[[6]byte]int{}
	for r := 0; r < workers; r++ {
		rankOf[[6]byte(emu.HostMAC(r))] = r
	}
	type key struct {
		dst    int
		op     wire.Opcode
		psn    uint32
		destQP uint32
	}
	entered := map[string]bool{}
	delivered := map[key]bool{} // sent out of its destination's port
	type stray struct {
		k           key
		port, frame int
	}
	var strays []stray
	var v frames.View
	for i, rec := range recs {
		iface := int(rec.Info.InterfaceIndex)
		port, side := iface/4, iface%4
		if side < 2 || port >= workers || pcapio.IsGhost(rec.Comments) || v.Parse(rec.Data) != nil {
			continue
		}
		if side == 2 {
			entered[string(rec.Data)] = true
			continue
		}
		if !v.ICRCOK() && !entered[string(rec.Data)] {
			return fmt.Sprintf("bad-icrc: the device sent out of port %d a %s with PSN %d and a bad ICRC (capture frame %d), not a frame it was handed", port, v.Opcode(), v.PSN(), i+1)
		}
		dst, ok := rankOf[[6]byte(v.DstMAC())]
		if !ok {
			continue
		}
		k := key{dst, v.Opcode(), v.PSN(), v.DestQP()}
		if dst == port {
			delivered[k] = true
		} else {
			strays = append(strays, stray{k, port, i + 1})
		}
	}
	for _, s := range strays {
		if !delivered[s.k] {
			return fmt.Sprintf("misdelivered: the device sent a %s with PSN %d for rank %d out of port %d (capture frame %d) and never out of port %d, rank %d's",
				s.k.op, s.k.psn, s.k.dst, s.port, s.frame, s.k.dst, s.k.dst)
		}
	}
	return ""
}

// settle reruns an inconclusive case, or one whose only evidence is a
// silent device, with a longer timeout (run judges a case): it returns
// the case as last run and its outcome. A case that holds the second time
// holds: the first failure was the machine's. Silence alone blames the
// device only when two runs in a row are silent: the first and its rerun,
// or, when the first run was inconclusive and its rerun is the first
// silent one, that rerun and one more at the same longer timeout.
func settle(c aggCase, out aggOutcome, run func(aggCase) aggOutcome) (aggCase, aggOutcome) {
	if !out.inconclusive && !out.silent {
		return c, out
	}
	longer := c.withTimeout(c.Timeout + inconclusiveRetry)
	again := run(longer)
	switch {
	case out.silent && again.silent:
		return c, out // mute with either timeout: shrink the quicker case
	case again.silent: // once silent, after an inconclusive run: confirm
		third := run(longer)
		if third.fail != "" || third.inconclusive {
			return longer, third
		}
		return c, aggOutcome{} // answering again: the machine's
	case again.fail != "" || again.inconclusive:
		return longer, again
	}
	return c, aggOutcome{} // the machine's, the first time
}

// VerdictInconclusive is a property's Verdict (and a report's) when no
// case failed but at least one was inconclusive: it neither holds nor
// fails, and says so (Passed false, Failure empty), so that a CI gate
// does not pass it silently: a device that hangs without a trace shows
// no evidence either, and would otherwise hold on every case.
const VerdictInconclusive = "inconclusive"

// Undecided reports whether the property is inconclusive: no failure,
// some cases inconclusive.
func (res PropertyResult) Undecided() bool { return res.Verdict == VerdictInconclusive }

// Failed reports whether the property fails (not inconclusive, not
// skipped).
func (res PropertyResult) Failed() bool { return !res.Passed && !res.Undecided() }

// settled runs case i (run judges it), settles it (settle) and records
// an inconclusive outcome in res: what every property against a device
// does with a case.
func (res *PropertyResult) settled(i int, c aggCase, run func(aggCase) aggOutcome) (aggCase, aggOutcome) {
	c, out := settle(c, run(c), run)
	if out.inconclusive {
		res.inconclusive(i, out)
	}
	return c, out
}

// inconclusive records case i's inconclusive outcome in res (and its
// shard record).
func (res *PropertyResult) inconclusive(i int, out aggOutcome) {
	if res.Inconclusive == 0 {
		res.FirstInconclusive = fmt.Sprintf("case %d: %s", i, out.detail)
	}
	res.Inconclusive++
	res.Shard.inconclusive(i)
}

// noteInconclusive adds the inconclusive note, if any, to res, and makes
// a property that did not fail inconclusive.
func (res *PropertyResult) noteInconclusive() {
	if res.Inconclusive == 0 {
		return
	}
	res.Notes = append(res.Notes, inconclusiveNote(res.Inconclusive, res.Cases, res.FirstInconclusive))
	if res.Passed {
		res.Passed, res.Verdict = false, VerdictInconclusive
	}
}

const inconclusiveWords = " cases inconclusive: the job failed in its transport with no fault to explain it and no evidence against the device, twice (the second time with a 4× longer timeout); first: "

func inconclusiveNote(n, cases int, first string) string {
	return fmt.Sprintf("%d of %d%s%s", n, cases, inconclusiveWords, first)
}

// Judge sets the report's Verdict from its properties': inconclusive
// when none fails and one is.
func (r *Report) Judge() {
	r.Verdict = ""
	undecided := false
	for _, p := range r.Properties {
		if p.Failed() && p.Skipped == "" {
			return
		}
		undecided = undecided || p.Undecided()
	}
	if undecided {
		r.Verdict = VerdictInconclusive
	}
}
