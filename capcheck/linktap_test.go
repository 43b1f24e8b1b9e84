package capcheck_test

import (
	"fmt"
	"sort"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/inaemu/inaemu/capcheck"
	"github.com/inaemu/inaemu/frames"
	"github.com/inaemu/inaemu/frames/wire"
	"github.com/inaemu/inaemu/internal/pcapio"
)

// Link taps: one interface per host link (a capture on the TAP backend's
// bridges PREFIX-brR), both directions on it. The tests below turn the
// clean emulated NetReduce capture netreduce_clean.pcapng (portR-in and
// portR-out) into such a capture and check that agg-sum verifies exactly
// the results it verified on the original.

const ltWorkers = 4

// ltRun is a clean emulated NetReduce job's capture: its records, its
// interface names, and the reference agg-sum counts from checking it as
// portR-in/portR-out.
type ltRun struct {
	recs  []pcapio.Record
	names []string
	ref   *capcheck.Report
	// results: good-ICRC WRITE data frames on portR-out interfaces, the
	// frames agg-sum has to check (counted without the checker).
	results int
}

func ltClean(t *testing.T) ltRun {
	t.Helper()
	recs, names, err := pcapio.ReadAllNamed(chkGoldenPath("netreduce_clean.pcapng"))
	require.NoError(t, err)
	require.Len(t, names, 2*ltWorkers)
	for _, n := range names {
		var p int
		var dir string
		_, err := fmt.Sscanf(n, "port%d-%s", &p, &dir)
		require.NoError(t, err, "interface %q", n)
	}
	run := ltRun{recs: recs, names: names}
	var v frames.View
	for _, rec := range recs {
		if ltIsOut(names[rec.Info.InterfaceIndex]) && v.Parse(rec.Data) == nil && v.ICRCOK() && ltIsWrite(v.Opcode()) {
			run.results++
		}
	}
	run.ref = capcheck.Check(recs, capcheck.CheckOptions{Interfaces: names})
	require.True(t, run.ref.Conforms, "%v", run.ref.Violations)
	require.Positive(t, run.ref.AggChecked)
	// In a clean run every result leaving the switch is a checked sum.
	require.Equal(t, run.results, run.ref.AggChecked)
	require.Zero(t, run.ref.AggUnchecked)
	require.Zero(t, run.ref.AggForwarded)
	t.Logf("reference: %d frames, %d results checked", len(recs), run.ref.AggChecked)
	return run
}

func ltIsOut(name string) bool {
	var p int
	n, _ := fmt.Sscanf(name, "port%d-out", &p)
	return n == 1 && name == fmt.Sprintf("port%d-out", p)
}

func ltPort(t *testing.T, name string) int {
	var p int
	var dir string
	_, err := fmt.Sscanf(name, "port%d-%s", &p, &dir)
	require.NoError(t, err)
	require.Contains(t, []string{"in", "out"}, dir)
	return p
}

func ltIsWrite(op wire.Opcode) bool {
	switch op {
	case wire.WriteFirst, wire.WriteMiddle, wire.WriteLast, wire.WriteLastWithImm, wire.WriteOnly, wire.WriteOnlyWithImm:
		return true
	}
	return false
}

// ltMerge puts portR-in and portR-out on one interface R named
// name(R), in timestamp order (ties in capture order). Data are copied.
func ltMerge(t *testing.T, run ltRun, name func(r int) string) ([]pcapio.Record, []string) {
	t.Helper()
	names := make([]string, ltWorkers)
	for r := range names {
		names[r] = name(r)
	}
	out := make([]pcapio.Record, len(run.recs))
	for i, rec := range run.recs {
		rec.Data = append([]byte(nil), rec.Data...)
		rec.Info.InterfaceIndex = ltPort(t, run.names[rec.Info.InterfaceIndex])
		require.Less(t, rec.Info.InterfaceIndex, ltWorkers)
		out[i] = rec
	}
	sort.SliceStable(out, func(a, b int) bool { return out[a].Info.Timestamp.Before(out[b].Info.Timestamp) })
	return out, names
}

func ltBridge(r int) string { return fmt.Sprintf("lab-br%d", r) }
func ltLink(r int) string   { return fmt.Sprintf("link%d", r) }

// ltHostMACs: host R's MAC is the source MAC of what it sends on
// portR-in (read from the original capture, not by the checker).
func ltHostMACs(t *testing.T, run ltRun) [][6]byte {
	t.Helper()
	macs := make([][6]byte, ltWorkers)
	seen := make([]bool, ltWorkers)
	for _, rec := range run.recs {
		n := run.names[rec.Info.InterfaceIndex]
		if ltIsOut(n) {
			continue
		}
		r := ltPort(t, n)
		mac := [6]byte(rec.Data[6:12])
		if seen[r] {
			require.Equal(t, macs[r], mac, "host %d sends from one MAC", r)
		}
		macs[r], seen[r] = mac, true
	}
	for r := range seen {
		require.True(t, seen[r], "host %d sent nothing", r)
	}
	return macs
}

func TestCheckLinkTapBridgeNames(t *testing.T) {
	run := ltClean(t)
	recs, names := ltMerge(t, run, ltBridge)
	rep := capcheck.Check(recs, capcheck.CheckOptions{Interfaces: names})
	assert.True(t, rep.Conforms)
	assert.Empty(t, rep.Violations)
	assert.Equal(t, len(run.recs), rep.Frames)
	assert.Equal(t, run.ref.AggChecked, rep.AggChecked)
	assert.Equal(t, run.results, rep.AggChecked)
	assert.Zero(t, rep.AggUnchecked)
	assert.Zero(t, rep.AggForwarded)
	assert.Equal(t, names, rep.VantagePoints)
	// LinkTaps changes nothing for bridge names.
	rep = capcheck.Check(recs, capcheck.CheckOptions{Interfaces: names, LinkTaps: true})
	assert.Empty(t, rep.Violations)
	assert.Equal(t, run.results, rep.AggChecked)
	assert.Zero(t, rep.AggUnchecked)
}

// TestCheckLinkTapNameSuffix: only names ending in -br<digits> are bridges.
func TestCheckLinkTapNameSuffix(t *testing.T) {
	run := ltClean(t)
	for _, tc := range []struct {
		name   func(r int) string
		bridge bool
	}{
		{ltBridge, true},
		{func(r int) string { return fmt.Sprintf("inaemu-br%d", r+10) }, true},
		{ltLink, false},
		{func(r int) string { return fmt.Sprintf("br%d", r) }, false},         // no -br
		{func(r int) string { return fmt.Sprintf("-br%d", r) }, false},        // no PREFIX
		{func(r int) string { return fmt.Sprintf("lab-br%dx", r) }, false},    // not digits
		{func(r int) string { return fmt.Sprintf("lab-br-%d", r) }, false},    // not digits
		{func(r int) string { return fmt.Sprintf("lab-bridge%d", r) }, false}, // not -br<digits>
	} {
		recs, names := ltMerge(t, run, tc.name)
		t.Run(names[0], func(t *testing.T) {
			rep := capcheck.Check(recs, capcheck.CheckOptions{Interfaces: names})
			assert.Empty(t, rep.Violations)
			if tc.bridge {
				assert.Equal(t, run.results, rep.AggChecked)
			} else {
				assert.Zero(t, rep.AggChecked)
			}
			assert.Zero(t, rep.AggUnchecked)
			rep = capcheck.Check(recs, capcheck.CheckOptions{Interfaces: names, LinkTaps: true})
			assert.Empty(t, rep.Violations)
			assert.Equal(t, run.results, rep.AggChecked)
			assert.Zero(t, rep.AggUnchecked)
		})
	}
}

// TestCheckLinkTapOption: plain interface names need LinkTaps.
func TestCheckLinkTapOption(t *testing.T) {
	run := ltClean(t)
	recs, names := ltMerge(t, run, ltLink)
	rep := capcheck.Check(recs, capcheck.CheckOptions{Interfaces: names})
	assert.Empty(t, rep.Violations)
	assert.Zero(t, rep.AggChecked)
	assert.Zero(t, rep.AggUnchecked)
	rep = capcheck.Check(recs, capcheck.CheckOptions{Interfaces: names, LinkTaps: true})
	assert.True(t, rep.Conforms)
	assert.Empty(t, rep.Violations)
	assert.Equal(t, run.ref.AggChecked, rep.AggChecked)
	assert.Zero(t, rep.AggUnchecked)
	assert.Zero(t, rep.AggForwarded)
}

// TestCheckLinkTapInterfaceOrder: dumpcap need not interleave its
// interfaces; all of link 0, then link 1, ... still checks every result.
func TestCheckLinkTapInterfaceOrder(t *testing.T) {
	run := ltClean(t)
	merged, _ := ltMerge(t, run, ltBridge)
	for _, tc := range []struct {
		label string
		name  func(r int) string
		opt   capcheck.CheckOptions
	}{
		{"bridges", ltBridge, capcheck.CheckOptions{}},
		{"link-taps", ltLink, capcheck.CheckOptions{LinkTaps: true}},
	} {
		t.Run(tc.label, func(t *testing.T) {
			var recs []pcapio.Record
			for r := ltWorkers - 1; r >= 0; r-- { // the last host first
				for _, rec := range merged {
					if rec.Info.InterfaceIndex == r {
						recs = append(recs, rec)
					}
				}
			}
			require.Len(t, recs, len(merged))
			back := 0
			for i := 1; i < len(recs); i++ {
				if recs[i].Info.Timestamp.Before(recs[i-1].Info.Timestamp) {
					back++
				}
			}
			require.Equal(t, ltWorkers-1, back, "the capture is out of timestamp order at every interface change")
			opt := tc.opt
			for r := 0; r < ltWorkers; r++ {
				opt.Interfaces = append(opt.Interfaces, tc.name(r))
			}
			rep := capcheck.Check(recs, opt)
			assert.Empty(t, rep.Violations)
			assert.Equal(t, run.ref.AggChecked, rep.AggChecked)
			assert.Zero(t, rep.AggUnchecked)
		})
	}
}

// TestCheckLinkTapAggSum: a result with one element changed (and its ICRC
// recomputed) on a link tap is the one agg-sum violation, whether it is a
// middle packet or the first packet, whose data follow the INA header.
func TestCheckLinkTapAggSum(t *testing.T) {
	run := ltClean(t)
	macs := ltHostMACs(t, run)
	merged, names := ltMerge(t, run, ltBridge)
	for _, tc := range []struct {
		op   wire.Opcode
		skip int // bytes of the payload before the data
	}{
		{wire.WriteMiddle, 0},
		{wire.WriteFirst, wire.INALen},
	} {
		t.Run(tc.op.String(), func(t *testing.T) {
			recs := make([]pcapio.Record, len(merged))
			copy(recs, merged)
			changed := -1
			var v frames.View
			for i := len(recs) / 2; i < len(recs); i++ {
				rec := recs[i]
				host := macs[rec.Info.InterfaceIndex]
				if [6]byte(rec.Data[0:6]) != host || [6]byte(rec.Data[6:12]) == host {
					continue // not from the switch to the host
				}
				if v.Parse(rec.Data) != nil || v.Opcode() != tc.op || !v.ICRCOK() {
					continue
				}
				if tc.skip > 0 {
					require.True(t, wire.IsINA(v.Payload()), "a result's first packet carries the INA header")
				}
				data := append([]byte(nil), rec.Data...)
				data[v.PayloadOffset()+tc.skip+6] ^= 0x20 // element 1, a mantissa bit
				require.NoError(t, frames.FixICRC(data))
				recs[i].Data = data
				changed = i
				break
			}
			require.Positive(t, changed)
			for _, opt := range []capcheck.CheckOptions{{Interfaces: names}, {Interfaces: names, LinkTaps: true}} {
				rep := capcheck.Check(recs, opt)
				require.Len(t, rep.Violations, 1, "%v", rep.Violations)
				got := rep.Violations[0]
				assert.Equal(t, capcheck.RuleAggSum, got.Rule)
				assert.Equal(t, changed, got.Index)
				assert.Contains(t, got.Detail, "element 1")
				assert.False(t, rep.Conforms)
				assert.Zero(t, rep.BadICRC, "the changed result carries a good ICRC")
				assert.Equal(t, run.ref.AggChecked-1, rep.AggChecked)
				assert.Zero(t, rep.AggUnchecked)
			}
		})
	}
}

// A cooked capture (tcpdump -i any) records no destination MAC: pcapio
// gives it as all zeros. The zero MAC is nobody's, so each link's host is
// still told apart by the source MACs and every result is verified.
func TestCheckLinkTapCookedNoDestinationMAC(t *testing.T) {
	run := ltClean(t)
	merged, names := ltMerge(t, run, ltBridge)
	ref := capcheck.Check(merged, capcheck.CheckOptions{Interfaces: names, LinkTaps: true})
	require.True(t, ref.Conforms, "%v", ref.Violations)
	require.Positive(t, ref.AggChecked)
	recs := make([]pcapio.Record, len(merged))
	for i, r := range merged {
		recs[i] = r
		recs[i].Data = append([]byte(nil), r.Data...)
		clear(recs[i].Data[0:6])
	}
	got := capcheck.Check(recs, capcheck.CheckOptions{Interfaces: names, LinkTaps: true})
	assert.True(t, got.Conforms, "%v", got.Violations)
	assert.Equal(t, ref.AggChecked, got.AggChecked)
	assert.Equal(t, ref.AggUnchecked, got.AggUnchecked)
}
