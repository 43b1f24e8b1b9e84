package main

import (
	"path/filepath"
	"regexp"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A capture of a run with PFC states its links' rate and propagation
// delay (pcapng if_speed, the "inaemu: link-delay=" description), so a
// plain `inaemu check` judges every pause the run's report says the
// switch sent, and the capture conforms (exit 0).
func TestCheckJudgesEmulatorPFCCaptureWithoutFlags(t *testing.T) {
	path := filepath.Join(t.TempDir(), "incast.pcapng")
	code, out, errOut := runCLI("run", "--mode", "traffic", "--workers", "5", "--link", "100G", "--tensor", "256KiB",
		"--pfc", "on", "--pfc-xoff", "20KB", "--seed", "1", "--pcap", path)
	require.Zero(t, code, errOut)
	m := regexp.MustCompile(`pfc +priority 0: (\d+) pauses sent`).FindStringSubmatch(out)
	require.NotNil(t, m, out)

	code, out, errOut = runCLI("check", path)
	assert.Zero(t, code, errOut)
	assert.Contains(t, out, "pfc          "+m[1]+" MAC Control frames, "+m[1]+" PAUSE/PFC judged against the frames they paused")
	assert.Contains(t, out, "result       conforms")
}
