package conformance

import (
	"fmt"
	"slices"
	"strings"

	"github.com/inaemu/inaemu/capcheck"
	"github.com/inaemu/inaemu/emu"
	"github.com/inaemu/inaemu/faultwire"
	"github.com/inaemu/inaemu/internal/pcapio"
)

// Judging a device by everything it emitted and owed. The hosts check
// the results they keep; a wrong sum they discard (a result in an old
// PSN, dropped as a duplicate) or a result the device withheld until the
// sender resent it passes that check. The wire's capture holds the
// evidence: capcheck's rules, applied to it exactly as `inaemu check`
// applies them to a `run --dut` capture, judge the device's side of the
// wire (wR-swR: what reached the device, swR-wR: what it sent):
//
//   - agg-sum: every result the device emitted is the rank-order sum of
//     the contributions that reached it (copies the wire forged are no
//     contribution; frames it dropped or corrupted on the way in never
//     reached the device);
//   - result-lost: every result the device owed left it before the
//     sender had to resend;
//   - icrc: every frame the device emitted carries a valid ICRC (a frame
//     the wire corrupted and the device forwarded unchanged is the
//     wire's).
//
// A violation there is the device's, whatever the job did; it is
// reported first, beside the job's own failure if it failed. A case
// whose results all went unchecked (agg-sum saw none whole) is not
// passed silently.

// deviceRules are the capture rules that judge a device, and whether
// they judge it on both of its sides (else only on what it sent).
var deviceRules = map[string]bool{capcheck.RuleAggSum: true, capcheck.RuleResultLost: true, capcheck.RuleICRC: false}

// deviceCaptureNames are the interface names of the wire's capture of a
// job of workers ranks (faultwire.CaptureNames), covering every
// interface a record names.
func deviceCaptureNames(recs []pcapio.Record, workers int) []string {
	var names []string
	for r := 0; r < workers; r++ {
		n := faultwire.CaptureNames(r)
		names = append(names, n[:]...)
	}
	for _, rec := range recs {
		for rec.Info.InterfaceIndex >= len(names) {
			n := faultwire.CaptureNames(len(names) / 4)
			names = append(names, n[:]...)
		}
	}
	return names
}

// deviceSide says whether the capture interface iface (one of names,
// deviceCaptureNames) is on the device's side of the wire, and whether it
// is what the device sent: the third and fourth of each rank's
// faultwire.CaptureNames (wR-swR, swR-wR), as deviceEmitted reads them.
func deviceSide(names []string, iface string) (device, sent bool) {
	i := slices.Index(names, iface)
	return i >= 0 && i%4 >= 2, i >= 0 && i%4 == 3
}

// judgeDevice applies the device rules to recs, the wire's capture of
// case c, and returns the device's failure ("" rule when none): the
// first violation on the device's side, else, when the job ended exact
// and no result the device sent could be checked, "unchecked". A ring
// job (c.Ring) through a device that only forwards has no results of the
// device's: agg-sum and result-lost do not apply, and nothing is
// unchecked; icrc does (and deviceEmitted and deviceGBN, elsewhere).
func judgeDevice(recs []pcapio.Record, c aggCase) (rule, detail string) {
	if len(recs) == 0 {
		return "", ""
	}
	names := deviceCaptureNames(recs, c.Workers)
	rep := capcheck.Check(recs, capcheck.CheckOptions{Interfaces: names, DType: c.DType})
	for _, v := range rep.Violations {
		both, ok := deviceRules[v.Rule]
		dev, sent := deviceSide(names, v.Interface)
		if !ok || !dev || !both && !sent || c.Ring && v.Rule != capcheck.RuleICRC {
			continue
		}
		return v.Rule, fmt.Sprintf("%s: the device %s (capture frame %d, interface %s): %s",
			v.Rule, map[bool]string{true: "sent", false: "was sent"}[sent], v.Frame, v.Interface, v.Detail)
	}
	if !c.Ring && rep.AggChecked+rep.AggForwarded == 0 && (rep.AggUnchecked > 0 || rep.AggError != "") {
		why := fmt.Sprintf("%d results unchecked (their contributions not all seen entering the device)", rep.AggUnchecked)
		if rep.AggError != "" {
			why = rep.AggError
		}
		return "unchecked", "unchecked: agg-sum could check none of the results the device sent: " + why
	}
	return "", ""
}

// deviceFirst is the device's failure in the wire's capture of case c,
// if it has one, as the case's outcome, with the job's own failure (err,
// or a wrong result in res) beside it: a stall or a wrong result the
// device caused reads as the device's doing, not as the path's. ok is
// false when the capture shows no fault of the device.
func deviceFirst(recs []pcapio.Record, c aggCase, res *emu.Result, err error) (aggOutcome, bool) {
	rule, detail := judgeDevice(recs, c)
	if rule == "" && err == nil && res != nil && !res.Exact {
		// A wrong result a forged or lost response caused (the sender
		// moved on): the device's handling of the connections comes
		// first, the wrong result beside it.
		if v := deviceGBN(c.Workers, recs); v != "" {
			rule, _, _ = strings.Cut(v, ":")
			detail = v // rule: the gbn rule's name (a file name part)
		}
	}
	if rule == "" || rule == "unchecked" && err != nil {
		// A job that failed is judged by its failure when the capture
		// holds no violation: too few results may have left to check.
		return aggOutcome{}, false
	}
	return aggOutcome{fail: rule, detail: detail + besideJob(res, err)}, true
}

// besideJob says how the job itself ended, when it failed ("" when it
// ended exact).
func besideJob(res *emu.Result, err error) string {
	switch {
	case err != nil:
		return "; the job failed too: " + err.Error()
	case res != nil && !res.Exact && res.Mismatch != nil:
		return "; and a host kept a wrong result: " + wrongResult(res.Mismatch).detail
	}
	return ""
}
