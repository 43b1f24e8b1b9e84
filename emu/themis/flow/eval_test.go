package flow_test

import (
	"fmt"
	"math"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/inaemu/inaemu/emu/themis/flow"
)

// The paper's evaluation (§6.1) on the flow-level mode. Stated
// parameters: 64 chunks, threshold chunkSize/16 (§5.3), A_K charged
// (Algorithm 1 line 2), one active chunk per dimension (ASTRA-sim's
// default), every stage's fixed delay executed. Sizes are MiB per NPU
// (ASTRA-sim counts MiB); the paper's exact list is not printed, so the
// fast run takes 100 MiB and 1 GiB and INAEMU_SCALE=1 ten sizes.

const mib = 1 << 20

var stated = flow.Setup{Chunks: 64, ChargeAK: true}

func sizes() []float64 {
	if os.Getenv("INAEMU_SCALE") == "1" {
		return []float64{100 * mib, 200 * mib, 300 * mib, 400 * mib, 500 * mib, 600 * mib, 700 * mib, 800 * mib, 900 * mib, 1024 * mib}
	}
	return []float64{100 * mib, 1024 * mib}
}

func run(t *testing.T, platform string, bytes float64, m flow.Method, s flow.Setup) flow.Result {
	t.Helper()
	top, err := flow.Platform(platform)
	require.NoError(t, err)
	r, err := flow.AllReduce(top, bytes, m, s)
	require.NoError(t, err)
	return r
}

// TestLargeCollectivesOrder: on every platform a 1 GiB all-reduce uses
// the network at least as well with Themis+FIFO as with the baseline, and
// with Themis+SCF as with Themis+FIFO (Fig. 8, Fig. 11).
func TestLargeCollectivesOrder(t *testing.T) {
	for _, p := range flow.Platforms() {
		b := run(t, p, 1024*mib, flow.Baseline, stated)
		f := run(t, p, 1024*mib, flow.ThemisFIFO, stated)
		s := run(t, p, 1024*mib, flow.ThemisSCF, stated)
		t.Logf("%-20s baseline %.1f %%  themis+fifo %.1f %%  themis+scf %.1f %%", p, 100*b.Utilisation, 100*f.Utilisation, 100*s.Utilisation)
		assert.GreaterOrEqual(t, f.Utilisation, b.Utilisation, p)
		assert.GreaterOrEqual(t, s.Utilisation, f.Utilisation, p)
	}
}

// TestFig9: a 1 GiB all-reduce on 3D-SW_SW_SW_homo. Under the baseline
// dim1 is the bottleneck, busy throughout, while dim2 and dim3 carry
// what the steady state lets them: bytes_K / BW_K against dim1's, i.e.
// (P−1)/P·S/16 and (P−1)/P·S/128 against (15/16)·S on equal bandwidths
// (5.8 % and 0.7 %, §6.1's "750Gbps of dim2 and 793.75Gbps of dim3 are
// underutilized"). Themis uses every dimension and SCF starves less than
// FIFO (higher least-active dimension).
func TestFig9(t *testing.T) {
	const p = "3D-SW_SW_SW_homo"
	b := run(t, p, 1024*mib, flow.Baseline, stated)
	u2 := (7.0 / 8 / 16) / (15.0 / 16)
	u3 := (7.0 / 8 / 128) / (15.0 / 16)
	assert.Greater(t, b.Dims[0].Utilisation, 0.97)
	assert.InDelta(t, u2, b.Dims[1].Utilisation, 0.01)
	assert.InDelta(t, u3, b.Dims[2].Utilisation, 0.005)
	minAct := func(r flow.Result) float64 {
		m := 1.0
		for _, d := range r.Dims {
			m = math.Min(m, mean(d.Serving))
		}
		return m
	}
	f := run(t, p, 1024*mib, flow.ThemisFIFO, stated)
	s := run(t, p, 1024*mib, flow.ThemisSCF, stated)
	for k := range s.Dims {
		assert.Greater(t, s.Dims[k].Utilisation, 0.85, "themis+scf dim%d", k+1)
		assert.Greater(t, f.Dims[k].Utilisation, 0.75, "themis+fifo dim%d", k+1)
	}
	assert.Greater(t, minAct(s), minAct(f))
	for _, r := range []struct {
		name string
		r    flow.Result
	}{{"baseline", b}, {"themis+fifo", f}, {"themis+scf", s}} {
		t.Logf("%-12s %v: activity %s; serving %s; utilisation %s", r.name, r.r.Time, meansOf(r.r, true), meansOf(r.r, false), utils(r.r))
	}
}

func mean(v []float64) float64 {
	var s float64
	for _, x := range v {
		s += x
	}
	return s / float64(len(v))
}

func meansOf(r flow.Result, activity bool) string {
	var f []string
	for _, d := range r.Dims {
		v := d.Serving
		if activity {
			v = d.Activity
		}
		f = append(f, fmt.Sprintf("%.1f %%", 100*mean(v)))
	}
	return strings.Join(f, ", ")
}

func utils(r flow.Result) string {
	var f []string
	for _, d := range r.Dims {
		f = append(f, fmt.Sprintf("%.1f %%", 100*d.Utilisation))
	}
	return strings.Join(f, ", ")
}

var fig10 = []string{"3D-SW_SW_SW_hetero", "4D-Ring_FC_Ring_SW"}

func fig10Mean(t *testing.T, chunks int, m flow.Method, s flow.Setup) float64 {
	s.Chunks = chunks
	var u float64
	for _, p := range fig10 {
		u += run(t, p, 100*mib, m, s).Utilisation / float64(len(fig10))
	}
	return u
}

// TestFig10: a 100 MiB all-reduce on Fig. 10's two platforms, 4 to 512
// chunks. In the bandwidth-only model (no fixed delays) the paper's
// trend holds: the baseline is flat (dim1, its bottleneck, always gets
// the chunks first), Themis rises with the chunk count. With every
// stage's fixed delay executed one chunk at a time (the stated
// parameters) the per-stage delays of 512 chunks swamp a 100 MiB
// collective and every method falls: docs/themis.md.
func TestFig10(t *testing.T) {
	bw := stated
	bw.NoFixedDelay = true
	counts := []int{4, 8, 16, 32, 64, 128, 256, 512}
	var line []string
	for _, m := range flow.Methods() {
		var us []float64
		for _, c := range counts {
			us = append(us, fig10Mean(t, c, m, bw))
		}
		line = append(line, fmt.Sprintf("%s %s", m.Name, pct(us)))
		switch m {
		case flow.Baseline:
			assert.InDelta(t, us[1], us[len(us)-1], 0.01, "the baseline is flat from 8 chunks")
		default:
			assert.Greater(t, us[len(us)-1], us[0]+0.3, "%s rises with chunks", m.Name)
		}
	}
	t.Logf("bandwidth-only, chunks %v: %s", counts, strings.Join(line, "; "))
	lo, hi := fig10Mean(t, 4, flow.Baseline, stated), fig10Mean(t, 512, flow.Baseline, stated)
	t.Logf("stated parameters: baseline %.1f %% at 4 chunks, %.1f %% at 512", 100*lo, 100*hi)
	assert.Less(t, hi, lo/2, "serialized fixed delays: 512 chunks cost the baseline more than half its utilisation")
}

func pct(v []float64) string {
	var f []string
	for _, x := range v {
		f = append(f, fmt.Sprintf("%.1f", 100*x))
	}
	return strings.Join(f, "/")
}

// TestFig11: utilisation rises with the collective's size (fixed delays
// weigh less), averaged over the six platforms, for every method.
func TestFig11(t *testing.T) {
	for _, m := range flow.Methods() {
		var small, large float64
		for _, p := range flow.Platforms() {
			small += run(t, p, 100*mib, m, stated).Utilisation / 6
			large += run(t, p, 1024*mib, m, stated).Utilisation / 6
		}
		t.Logf("%-12s 100 MiB %.1f %%, 1 GiB %.1f %%", m.Name, 100*small, 100*large)
		assert.Greater(t, large, small, m.Name)
	}
}

// summary is the paper's averages over platforms and sizes: the
// communication-time reduction of each Themis method over the baseline
// (mean of the per-point ratios, Fig. 8) and each method's mean
// utilisation (Fig. 11).
type summary struct{ speedFIFO, speedSCF, uBase, uFIFO, uSCF float64 }

func summarise(t *testing.T, s flow.Setup) summary {
	var out summary
	n := 0.0
	for _, p := range flow.Platforms() {
		for _, b := range sizes() {
			rb := run(t, p, b, flow.Baseline, s)
			rf := run(t, p, b, flow.ThemisFIFO, s)
			rs := run(t, p, b, flow.ThemisSCF, s)
			out.speedFIFO += rb.Seconds / rf.Seconds
			out.speedSCF += rb.Seconds / rs.Seconds
			out.uBase += rb.Utilisation
			out.uFIFO += rf.Utilisation
			out.uSCF += rs.Utilisation
			n++
		}
	}
	out.speedFIFO /= n
	out.speedSCF /= n
	out.uBase /= n
	out.uFIFO /= n
	out.uSCF /= n
	return out
}

func (s summary) String() string {
	return fmt.Sprintf("time reduction fifo %.2fx scf %.2fx; utilisation baseline %.1f %% fifo %.1f %% scf %.1f %%",
		s.speedFIFO, s.speedSCF, 100*s.uBase, 100*s.uFIFO, 100*s.uSCF)
}

// TestHeadlineNumbers: the paper's averages (§6.1: 1.58× and 1.72× less
// communication time for Themis+FIFO and Themis+SCF; Fig. 11: 56.31 %,
// 87.67 %, 95.14 %). At the stated parameters the flow mode falls short
// (logged, not asserted: docs/themis.md's table); without the stages'
// fixed delays it reproduces every one within 10 % (Fig. 10 at 4
// chunks within 20 %).
func TestHeadlineNumbers(t *testing.T) {
	t.Logf("stated parameters: %v", summarise(t, stated))
	bw := stated
	bw.NoFixedDelay = true
	s := summarise(t, bw)
	t.Logf("bandwidth only:    %v", s)
	assert.InEpsilon(t, 1.58, s.speedFIFO, 0.10)
	assert.InEpsilon(t, 1.72, s.speedSCF, 0.10)
	assert.InEpsilon(t, 0.5631, s.uBase, 0.10)
	assert.InEpsilon(t, 0.8767, s.uFIFO, 0.10)
	assert.InEpsilon(t, 0.9514, s.uSCF, 0.10)
	assert.InEpsilon(t, 0.4858, fig10Mean(t, 4, flow.ThemisSCF, bw), 0.20, "Fig. 10 SCF at 4 chunks")
	assert.InEpsilon(t, 0.9118, fig10Mean(t, 512, flow.ThemisSCF, bw), 0.10, "Fig. 10 SCF at 512 chunks")
}

// TestParameterTable (INAEMU_SCALE=1) logs the averages over the
// parameters the paper does not state: A_K charged or not, active
// chunks per dimension, fixed delays executed or not.
func TestParameterTable(t *testing.T) {
	if os.Getenv("INAEMU_SCALE") != "1" {
		t.Skip("INAEMU_SCALE=1 runs the parameter table")
	}
	for _, nofix := range []bool{false, true} {
		for _, ak := range []bool{true, false} {
			for _, act := range []int{1, 2, 4, 8} {
				s := flow.Setup{Chunks: 64, ChargeAK: ak, ActivePerDim: act, NoFixedDelay: nofix}
				f4 := [2]float64{fig10Mean(t, 4, flow.ThemisFIFO, s), fig10Mean(t, 4, flow.ThemisSCF, s)}
				f512 := [2]float64{fig10Mean(t, 512, flow.ThemisFIFO, s), fig10Mean(t, 512, flow.ThemisSCF, s)}
				t.Logf("| %v | %v | %d | %v | fig10 fifo %.1f->%.1f scf %.1f->%.1f |", !nofix, ak, act, summarise(t, s),
					100*f4[0], 100*f512[0], 100*f4[1], 100*f512[1])
			}
		}
	}
}
