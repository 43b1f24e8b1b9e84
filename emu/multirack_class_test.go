package emu

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/inaemu/inaemu/emu/fabric"
	"github.com/inaemu/inaemu/frames"
	"github.com/inaemu/inaemu/frames/wire"
	"github.com/inaemu/inaemu/internal/pcapio"
)

// capturedFrame is one frame of a capture and the interface it was
// captured on.
type capturedFrame struct {
	link string
	v    frames.View
}

func readCapture(t *testing.T, b []byte) []capturedFrame {
	t.Helper()
	rd, err := pcapio.NewReader("capture", bytes.NewReader(b))
	require.NoError(t, err)
	var out []capturedFrame
	for {
		rec, err := rd.Next()
		if err != nil {
			break
		}
		var c capturedFrame
		if c.v.Parse(append([]byte(nil), rec.Data...)) != nil {
			continue
		}
		c.link = rd.Interfaces()[rec.Info.InterfaceIndex]
		out = append(out, c)
	}
	return out
}

// A two-rack NetReduce job with --dscp 26 --cc dcqcn sends the tree's
// frames (partials, totals, notifications) in the job's class, as its
// hosts send theirs: DSCP 26 (priority 3, the priority PFC and the
// priority queues give the job) and ECT(0), so RED may mark them; the
// results a leaf translates for its ranks carry the job's class too. A
// job without --dscp or --cc keeps TClass 0 everywhere.
func TestMultiRackTreeFramesInTheJobsClass(t *testing.T) {
	for _, c := range []struct {
		name     string
		dscp     int
		cc       string
		wantDSCP uint8
		ect      bool
	}{
		{"dscp26-dcqcn", 26, "dcqcn", 26, true},
		{"dscp26", 26, "", 26, false},
		{"default", 0, "", 0, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg := multiRack(t, 2, 2, 10e9)
			cfg.DSCP, cfg.CC = c.dscp, c.cc
			var capture bytes.Buffer
			cfg.Capture = &capture
			runOK(t, cfg)
			var tree, results int
			for _, f := range readCapture(t, capture.Bytes()) {
				v := &f.v
				op := v.Opcode()
				switch {
				case wire.IsINATree(op):
					tree++
				case v.DestQP() == RecvQPN && op.IsWrite():
					results++ // the job's WRITEs: gradients and results
				default:
					continue
				}
				assert.Equal(t, c.wantDSCP, v.DSCP(), "%v on %s", op, f.link)
				if c.ect {
					assert.Contains(t, []uint8{frames.ECNECT0, frames.ECNCE}, v.ECN(), "%v on %s", op, f.link)
				} else {
					assert.Equal(t, frames.ECNNotECT, v.ECN(), "%v on %s", op, f.link)
				}
			}
			assert.Positive(t, tree)
			assert.Positive(t, results)
		})
	}
}

// ECN aggregates across the tree in a real run. RED marks every ECT
// frame that finds its egress queue non-empty (Kmin = Kmax = 1 byte,
// Pmax 1), so partials, totals and results are marked on some links. The
// capture shows each frame on each link direction it crosses, after that
// direction's queue marked it; frames are matched across links by their
// data (a total's and its results' payload is the packet's sum):
//   - a partial that reached the spine CE-marked makes every total of its
//     packet leave the spine marked, and a total that reached a leaf
//     marked makes every result the leaf translates from it marked;
//   - the converse: a total marked though neither partial was, or a
//     result marked though its total was not, can only be the marking of
//     the direction it was captured on, so there are no more of them
//     than that direction's queue marked (res.PFC's ecn_marks).
//
// The job stays exact and its ranks get CNPs.
func TestMultiRackCEAggregates(t *testing.T) {
	cfg := multiRack(t, 2, 2, 10e9)
	cfg.DSCP, cfg.CC = 26, "dcqcn"
	cfg.Congestion.RED = fabric.RED{Kmin: 1, Kmax: 1, Pmax: 1}
	var capture bytes.Buffer
	cfg.Capture = &capture
	res := runOK(t, cfg)
	marks := map[string]uint64{} // by direction, the job's priority 3
	for _, s := range res.PFC {
		if s.Priority == 26>>3 {
			marks[s.Direction] += s.ECNMarks
		}
	}
	frs := readCapture(t, capture.Bytes())
	partialCE := map[string]bool{}    // by packet: some leaf's partial reached the spine marked
	totalCE := map[[2]string][]bool{} // by link and packet: the totals as they reached a leaf
	packetOf := map[string]string{}   // a total's data: its packet
	type result struct{ link, sum string }
	var results []result
	var resultCE []bool
	for _, f := range frs {
		v := &f.v
		switch op := v.Opcode(); {
		case op == wire.OpINAPartial || op == wire.OpINATotal:
			_, th := v.INATree()
			p := fmt.Sprintf("(%d,%d)", th.Msg(), th.Offset())
			if op == wire.OpINAPartial {
				partialCE[p] = partialCE[p] || v.CE()
			} else {
				packetOf[string(v.Payload()[wire.INALen+wire.INATreeLen:])] = p
				k := [2]string{f.link, p}
				totalCE[k] = append(totalCE[k], v.CE())
			}
		case v.DestQP() == RecvQPN && op.IsWrite() && strings.HasPrefix(f.link, "leaf") && strings.Contains(f.link, "-h"):
			data := v.Payload()
			if op == wire.WriteFirst || op == wire.WriteOnly || op == wire.WriteOnlyWithImm {
				data = data[wire.INALen:]
			}
			results = append(results, result{f.link, string(data)})
			resultCE = append(resultCE, v.CE())
		}
	}
	require.NotEmpty(t, totalCE)
	require.NotEmpty(t, results)
	excess := map[string]uint64{} // marked frames no input explains, by link
	var markedPartials, markedTotals, markedResults int
	for _, ce := range partialCE {
		if ce {
			markedPartials++
		}
	}
	totalAt := map[[2]string]bool{} // by leaf and packet: the total arrived marked
	for k, l := range totalCE {
		leaf := strings.TrimPrefix(k[0], "spine0-")
		for _, ce := range l {
			totalAt[[2]string{leaf, k[1]}] = totalAt[[2]string{leaf, k[1]}] || ce
			if ce {
				markedTotals++
			}
			if partialCE[k[1]] {
				assert.True(t, ce, "a marked partial made an unmarked total to %s", leaf)
			} else if ce {
				excess[k[0]]++
			}
		}
	}
	for i, r := range results {
		leaf := strings.Split(r.link, "-")[0]
		ce, ok := totalAt[[2]string{leaf, packetOf[r.sum]}]
		require.True(t, ok, "a result on %s no total to %s carried", r.link, leaf)
		if resultCE[i] {
			markedResults++
		}
		if ce {
			assert.True(t, resultCE[i], "a marked total made an unmarked result on %s", r.link)
		} else if resultCE[i] {
			excess[r.link]++
		}
	}
	for link, n := range excess {
		assert.LessOrEqual(t, n, marks[link], "%s: marked frames no input explains, beyond its own queue's marks", link)
	}
	t.Logf("marked: %d partials, %d totals, %d results; marked by no input %v; queue marks %v; CNPs %d",
		markedPartials, markedTotals, markedResults, excess, marks, res.Jobs[0].DCQCN.CNPReceived)
	assert.Positive(t, markedPartials, "RED marks partials")
	assert.Positive(t, res.Jobs[0].DCQCN.CNPReceived, "the marks reach the senders as CNPs")
}
