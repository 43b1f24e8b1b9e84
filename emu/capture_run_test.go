package emu

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gopacket/gopacket/pcapgo"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/inaemu/inaemu/faults"
	"github.com/inaemu/inaemu/frames"
	"github.com/inaemu/inaemu/internal/pcapio"
)

// A capture of a whole job: interface names, timestamp order, fault
// annotations, dropped frames shown where they would have arrived.
func TestCaptureOfFaultedRun(t *testing.T) {
	var events []faults.Event
	for _, s := range []string{
		"drop port=0 dir=out class=data nth=1",
		"corrupt port=2 dir=in class=data nth=5",
		"dup port=1 dir=in class=data nth=3",
		"delay=20us port=3 dir=out class=data nth=2",
	} {
		ev, err := faults.Parse(s)
		require.NoError(t, err)
		events = append(events, ev)
	}
	for _, mode := range []Mode{NetReduce, Ring} {
		t.Run(mode.String(), func(t *testing.T) {
			cfg := DefaultConfig()
			cfg.Workers, cfg.Mode, cfg.TensorBytes, cfg.MsgLen, cfg.Seed = 4, mode, 64<<10, 8, 5
			cfg.Events = events
			var buf bytes.Buffer
			cfg.Capture = &buf
			res, err := Run(cfg)
			require.NoError(t, err)
			require.True(t, res.Exact, "%+v", res.Mismatch)

			path := filepath.Join(t.TempDir(), "run.pcapng")
			require.NoError(t, os.WriteFile(path, buf.Bytes(), 0o644))
			ng, err := pcapgo.NewNgReader(bytes.NewReader(buf.Bytes()), pcapgo.DefaultNgReaderOptions)
			require.NoError(t, err)
			// Interfaces are only known once read; drain the packets first.
			for {
				if _, _, err := ng.ReadPacketData(); err != nil {
					break
				}
			}
			require.Equal(t, 2*cfg.Workers, ng.NInterfaces())
			names := map[int]string{}
			for i := 0; i < ng.NInterfaces(); i++ {
				ifc, err := ng.Interface(i)
				require.NoError(t, err)
				want := fmt.Sprintf("port%d-%s", i/2, []string{"in", "out"}[i%2])
				assert.Equal(t, want, ifc.Name)
				names[i] = ifc.Name
			}

			recs, err := pcapio.ReadAll(path)
			require.NoError(t, err)
			require.NotEmpty(t, recs)
			var last time.Time
			perIf := map[string]int{}
			var ghosts, corrupt, dups, delayed int
			for i, r := range recs {
				require.False(t, r.Info.Timestamp.Before(last), "record %d goes back in time", i)
				last = r.Info.Timestamp
				ifn := names[r.Info.InterfaceIndex]
				perIf[ifn]++
				for _, c := range r.Comments {
					require.True(t, strings.HasPrefix(c, "inaemu: fault="), "comment %q", c)
				}
				if len(r.Comments) == 0 {
					continue
				}
				c := strings.Join(r.Comments, " ")
				switch {
				case strings.Contains(c, "(not delivered)"):
					ghosts++
					assert.Equal(t, "port0-out", ifn, "the drop event is on port0-out")
					assert.Contains(t, c, "fault=drop")
					assert.Contains(t, c, `spec="drop port=0 dir=out class=data nth=1"`)
					ok, err := frames.VerifyICRC(r.Data)
					require.NoError(t, err)
					assert.True(t, ok, "the dropped result frame itself was fine")
				case strings.Contains(c, "fault=corrupt"):
					corrupt++
					assert.Equal(t, "port2-in", ifn)
					ok, err := frames.VerifyICRC(r.Data)
					require.NoError(t, err)
					assert.False(t, ok, "the capture shows the corrupted frame as delivered: bad ICRC")
				case strings.Contains(c, "fault=duplicate"):
					dups++
					assert.Equal(t, "port1-in", ifn)
				case strings.Contains(c, "fault=delay"):
					delayed++
					assert.Equal(t, "port3-out", ifn)
				default:
					t.Errorf("unexpected comment %q", c)
				}
			}
			assert.Equal(t, 1, ghosts)
			assert.Equal(t, 1, corrupt)
			assert.Equal(t, 2, dups, "both copies of the duplicated frame are annotated")
			assert.Equal(t, 1, delayed)
			assert.Equal(t, uint64(1), res.Faults.Dropped)
			assert.Equal(t, uint64(1), res.Faults.Corrupted)
			assert.Equal(t, uint64(1), res.Faults.Duplicated)
			assert.Equal(t, uint64(1), res.Faults.Delayed)
			// Everything a host sent is in the capture on its port<r>-in,
			// once more for the duplicate.
			in := 0
			for r := 0; r < cfg.Workers; r++ {
				in += perIf[fmt.Sprintf("port%d-in", r)]
			}
			assert.Equal(t, int(res.FramesSent)+1, in, "frames sent + the duplicate")
		})
	}
}
