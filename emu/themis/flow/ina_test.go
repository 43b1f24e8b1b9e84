package flow_test

import (
	"fmt"
	"math"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/inaemu/inaemu/emu/switching"
	"github.com/inaemu/inaemu/emu/themis"
	"github.com/inaemu/inaemu/emu/themis/flow"
)

// An ina dimension's aggregation is NetReduce's switch program's: the
// float path's latency in place of the forwarding path's.
func TestINADefaultIsNetReduceSwitch(t *testing.T) {
	if got, want := themis.DefaultAggregation, switching.DefaultTiming.AggregateFloat-switching.DefaultTiming.Forward; got != want {
		t.Errorf("themis.DefaultAggregation = %v, want the switch's float aggregation minus forwarding %v", got, want)
	}
}

const (
	stepLat = 1700 * time.Nanosecond // Table 2's NIC dimension
	agg     = 2150e-9                // 2.4 µs aggregation - 250 ns forwarding
)

// runAR schedules and runs an all-reduce with one active chunk per
// dimension.
func runAR(t *testing.T, top themis.Topology, bytes float64, m flow.Method, chunks int) flow.Result {
	t.Helper()
	r, err := flow.AllReduce(top, bytes, m, flow.Setup{Chunks: chunks, ChargeAK: true})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// One dimension of p NPUs, C chunks of an S-byte all-reduce, one chunk at
// a time: ina pays C times one step (L + aggregation) and sends S;
// Halving-Doubling pays C times 2·log2 p steps and sends 2(p−1)/p·S. So
// ina wins iff (p−2)/p · S/BW > C·(L + agg − 2·log2 p·L): for p > 2 when
// bandwidth-bound, for 2·log2 p·L > L + agg (p ≥ 4 at L = 1.7 µs) when
// latency-bound; at p = 2 both send S and Halving-Doubling's two steps
// (3.4 µs) beat ina's one (3.85 µs).
func TestINAOneDimension(t *testing.T) {
	const bw = 100e9
	for _, S := range []float64{1 << 10, 1 << 20, 1 << 30} {
		for _, C := range []int{1, 8, 64} {
			for p := 2; p <= 64; p *= 2 {
				lg := math.Log2(float64(p))
				wantINA := float64(C)*(stepLat.Seconds()+agg) + S/bw
				wantHD := float64(C)*2*lg*stepLat.Seconds() + 2*float64(p-1)/float64(p)*S/bw
				dim := themis.Dim{Size: p, BW: bw, Latency: stepLat}
				dim.Kind = themis.INA
				ina := runAR(t, themis.Topology{dim}, S, flow.ThemisSCF, C)
				dim.Kind = themis.Switch
				hd := runAR(t, themis.Topology{dim}, S, flow.ThemisSCF, C)
				if math.Abs(ina.Seconds-wantINA) > 1e-9*wantINA || math.Abs(hd.Seconds-wantHD) > 1e-9*wantHD {
					t.Errorf("S=%g C=%d p=%d: ina %v s (want %v), halving-doubling %v s (want %v)", S, C, p, ina.Seconds, wantINA, hd.Seconds, wantHD)
				}
				if !relNear(ina.Dims[0].Bytes, S) || !relNear(hd.Dims[0].Bytes, 2*float64(p-1)/float64(p)*S) {
					t.Errorf("S=%g C=%d p=%d: bytes ina %v, hd %v", S, C, p, ina.Dims[0].Bytes, hd.Dims[0].Bytes)
				}
				// The crossover from the formula alone.
				wins := float64(p-2)/float64(p)*S/bw > float64(C)*(stepLat.Seconds()+agg-2*lg*stepLat.Seconds())
				if (ina.Seconds < hd.Seconds) != wins {
					t.Errorf("S=%g C=%d p=%d: ina %v s vs hd %v s, the formula says ina wins: %v", S, C, p, ina.Seconds, hd.Seconds, wins)
				}
				if p == 2 && ina.Seconds <= hd.Seconds {
					t.Errorf("p=2: ina %v s should lose to halving-doubling's %v s by its latency", ina.Seconds, hd.Seconds)
				}
				if p >= 4 && ina.Seconds >= hd.Seconds {
					t.Errorf("S=%g C=%d p=%d: ina %v s should beat halving-doubling's %v s", S, C, p, ina.Seconds, hd.Seconds)
				}
			}
		}
	}
}

// 2D-SW_SW with its NIC dimension (64 NPUs, 800 Gb/s, 1.7 µs) an ina
// switch: the baseline's RS on dim1, the switch's AR of S/16 on dim2,
// the AG on dim1. By hand, one chunk: a + b + a with a = 4 steps ×
// 700 ns + 15/16·S/BW1 and b = 1.7 µs + agg + S/16/BW2; two chunks of
// S/2 (b ≤ a): dim1 serves RS0, RS1, AG0, AG1 back to back: 4a.
func TestINATwoDimensionsByHand(t *testing.T) {
	top, err := flow.Platform("2D-SW_SW")
	if err != nil {
		t.Fatal(err)
	}
	top[1].Kind = themis.INA
	bw1, bw2 := 1200e9/8, 800e9/8
	for _, S := range []float64{1 << 20, 1 << 30} {
		a := 4*700e-9 + 15.0/16*S/bw1
		b := stepLat.Seconds() + agg + S/16/bw2
		r := runAR(t, top, S, flow.Baseline, 1)
		if want := 2*a + b; math.Abs(r.Seconds-want) > 1e-9*want {
			t.Errorf("S=%g, 1 chunk: %v s, want %v", S, r.Seconds, want)
		}
		if !relNear(r.Dims[1].Bytes, S/16) {
			t.Errorf("S=%g: ina bytes %v, want S/16 = %v", S, r.Dims[1].Bytes, S/16)
		}
		a2, b2 := 4*700e-9+15.0/16*S/2/bw1, stepLat.Seconds()+agg+S/2/16/bw2
		if b2 > a2 {
			t.Fatalf("S=%g: the hand schedule needs b ≤ a (%v, %v)", S, b2, a2)
		}
		r = runAR(t, top, S, flow.Baseline, 2)
		if want := 4 * a2; math.Abs(r.Seconds-want) > 1e-9*want {
			t.Errorf("S=%g, 2 chunks: %v s, want %v", S, r.Seconds, want)
		}
	}
}

// inaPlatform is 2D-SW_SW (dim1 16 NPUs, 1200 Gb/s, 700 ns) with a
// second dimension of p NPUs at gbps, a switch or an ina switch.
func inaPlatform(k themis.DimKind, p int, gbps float64) themis.Topology {
	return themis.Topology{
		{Kind: themis.Switch, Size: 16, BW: 1200e9 / 8, Latency: 700 * time.Nanosecond},
		{Kind: k, Size: p, BW: gbps * 1e9 / 8, Latency: stepLat},
	}
}

// The sweep of docs/themis.md ("In-network aggregation as a
// dimension"): all-reduce time with dim2 a switch (Halving-Doubling) or
// ina, baseline and Themis+SCF, over dim2's size, bandwidth, the chunk
// count and the size. It asserts what the formulas say: with the
// baseline the ina dimension is always the middle (dim2 is last), its
// stage is never longer than Halving-Doubling's for p ≥ 4 (S/Q against
// 2(p−1)/p·S/Q bytes, one step against 2·log2 p), so the all-reduce is
// never slower, and strictly faster when dim2 carries the critical
// path (one chunk, or latency-bound chunks); with 64 chunks of 1 GiB
// dim1 is the baseline's bottleneck and ina changes nothing. Themis
// moves load onto dim2, and at 1 GiB with 64 chunks ina makes it no
// slower for p ≥ 4. INAEMU_SCALE=1 logs the whole grid.
func TestINASweep(t *testing.T) {
	type key struct {
		S      float64
		gbps   float64
		p, C   int
		k      themis.DimKind
		method string
	}
	res := map[key]float64{} // lookups only; the log walks the loops
	var b strings.Builder
	full := os.Getenv("INAEMU_SCALE") == "1"
	for _, S := range []float64{1 << 20, 100 << 20, 1 << 30} {
		for _, gbps := range []float64{200, 800, 3200} {
			for _, p := range []int{2, 4, 16, 64} {
				for _, C := range []int{1, 4, 64} {
					fmt.Fprintf(&b, "| %s | %g | %d | %d |", sizeName(S), gbps, p, C)
					for _, k := range []themis.DimKind{themis.Switch, themis.INA} {
						for _, m := range []flow.Method{flow.Baseline, flow.ThemisSCF} {
							r := runAR(t, inaPlatform(k, p, gbps), S, m, C)
							res[key{S, gbps, p, C, k, m.Name}] = r.Seconds
							fmt.Fprintf(&b, " %.1f |", r.Seconds*1e6)
						}
					}
					fmt.Fprintf(&b, " %.2f× | %.2f× |\n", res[key{S, gbps, p, C, themis.Switch, "baseline"}]/res[key{S, gbps, p, C, themis.INA, "baseline"}],
						res[key{S, gbps, p, C, themis.Switch, "themis+scf"}]/res[key{S, gbps, p, C, themis.INA, "themis+scf"}])
					hdB, inaB := res[key{S, gbps, p, C, themis.Switch, "baseline"}], res[key{S, gbps, p, C, themis.INA, "baseline"}]
					if p >= 4 && inaB > hdB*(1+1e-12) {
						t.Errorf("S=%s bw=%g p=%d C=%d: baseline with ina %v s, slower than halving-doubling's %v s", sizeName(S), gbps, p, C, inaB, hdB)
					}
					if p >= 4 && (C == 1 || S == 1<<20) && !(inaB < hdB) {
						t.Errorf("S=%s bw=%g p=%d C=%d: baseline with ina %v s, not faster than %v s where dim2 is on the critical path", sizeName(S), gbps, p, C, inaB, hdB)
					}
					if S == 1<<30 && C == 64 && math.Abs(inaB-hdB) > 1e-3*hdB {
						t.Errorf("bw=%g p=%d: 1 GiB in 64 chunks is dim1-bound, yet ina %v s vs %v s", gbps, p, inaB, hdB)
					}
					hdT, inaT := res[key{S, gbps, p, C, themis.Switch, "themis+scf"}], res[key{S, gbps, p, C, themis.INA, "themis+scf"}]
					if S == 1<<30 && C == 64 && p >= 4 && inaT > hdT*(1+1e-12) {
						t.Errorf("bw=%g p=%d: Themis with ina %v s, slower than with halving-doubling %v s", gbps, p, inaT, hdT)
					}
				}
			}
		}
	}
	if full {
		t.Log("\n| size | dim2 Gb/s | p | chunks | switch base µs | switch Themis µs | ina base µs | ina Themis µs | base gain | Themis gain |\n|---|---|---|---|---|---|---|---|---|---|\n" + b.String())
	}
}

func relNear(a, b float64) bool { return math.Abs(a-b) <= 1e-9*math.Max(1, math.Abs(b)) }

func sizeName(s float64) string {
	if s >= 1<<30 {
		return fmt.Sprintf("%g GiB", s/(1<<30))
	}
	return fmt.Sprintf("%g MiB", s/(1<<20))
}

// Table 2's platforms with their last (NIC, pod-to-pod) switch an ina
// switch, 64 chunks: at 1 GiB Themis+SCF is never slower with ina; the
// baseline gains where the last dimension is on its critical path.
func TestINATable2(t *testing.T) {
	var b strings.Builder
	for _, name := range flow.Platforms() {
		for _, S := range []float64{1 << 20, 1 << 30} {
			fmt.Fprintf(&b, "| %s | %s |", name, sizeName(S))
			var got [2][2]float64
			for i, k := range []themis.DimKind{themis.Switch, themis.INA} {
				top, err := flow.Platform(name)
				if err != nil {
					t.Fatal(err)
				}
				top[len(top)-1].Kind = k
				for j, m := range []flow.Method{flow.Baseline, flow.ThemisSCF} {
					got[i][j] = runAR(t, top, S, m, 64).Seconds
					fmt.Fprintf(&b, " %.1f |", got[i][j]*1e6)
				}
			}
			fmt.Fprintf(&b, " %.2f× | %.2f× |\n", got[0][0]/got[1][0], got[0][1]/got[1][1])
			if got[1][0] > got[0][0]*(1+1e-12) {
				t.Errorf("%s %s: baseline with ina %v s, slower than %v s", name, sizeName(S), got[1][0], got[0][0])
			}
			if S == 1<<30 && got[1][1] > got[0][1]*(1+1e-12) {
				t.Errorf("%s %s: Themis+SCF with ina %v s, slower than %v s", name, sizeName(S), got[1][1], got[0][1])
			}
		}
	}
	t.Log("\n| platform | size | switch base µs | switch Themis µs | ina base µs | ina Themis µs | base gain | Themis gain |\n|---|---|---|---|---|---|---|---|\n" + b.String())
}
