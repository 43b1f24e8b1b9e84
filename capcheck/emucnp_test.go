package capcheck_test

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/inaemu/inaemu/capcheck"
	"github.com/inaemu/inaemu/emu"
	"github.com/inaemu/inaemu/emu/scenario"
	"github.com/inaemu/inaemu/internal/pcapio"
)

// multiRackDCQCN is a NetReduce allreduce across racks with DCQCN and
// RED in a tight buffer (found by the congestion suite): ranks h6 and h7
// under leaf3, h3 under leaf1. The leaves' uplinks carry the tree's
// partials and totals, all from one address each way, so they read as a
// host's link by their MACs; the CNPs the ranks' NICs send cross them
// too.
const multiRackDCQCN = `
mtu: 512
link: 25G
seed: 182039911335037
timeout: 14
topology: {kind: spine-leaf, leaves: 4, hosts_per_leaf: 2, spines: 1, uplink: 25G}
switch_buffer: "32768"
pfc: "off"
red: 4KB,165KB,65%
jobs:
  - {name: j0, mode: netreduce, ranks: [h6, h7, h3], tensor: "28464", msg_len: 24, cc: dcqcn, dscp: 26}
`

// TestCNPRulesSkipTreeLinks: each CNP is judged once, where it leaves its
// receiver's NIC, not again on a leaf's uplink of the tree (there it was
// taken for a second CNP 1.3 µs after the first, a cnp-rate violation).
func TestCNPRulesSkipTreeLinks(t *testing.T) {
	sc, err := scenario.Parse([]byte(multiRackDCQCN))
	require.NoError(t, err)
	cfg := emu.DefaultConfig()
	require.NoError(t, sc.Apply(&cfg))
	var buf bytes.Buffer
	cfg.Capture = &buf
	res, err := emu.Run(cfg)
	require.NoError(t, err)
	require.True(t, res.Exact)
	require.NotNil(t, res.Jobs[0].DCQCN)
	sent := res.Jobs[0].DCQCN.CNPSent
	require.NotZero(t, sent, "the run marked and notified")

	rd, err := pcapio.NewReader("capture", bytes.NewReader(buf.Bytes()))
	require.NoError(t, err)
	recs, names, err := rd.All()
	require.NoError(t, err)
	rep := capcheck.Check(recs, capcheck.CheckOptions{Interfaces: names})
	var tree int
	for _, s := range rep.Inferences {
		if bytes.Contains([]byte(s), []byte("switch-to-switch")) {
			tree++
		}
	}
	assert.Equal(t, 2, tree, "leaf1's and leaf3's uplinks carry the tree: %q", rep.Inferences)
	for _, v := range rep.Violations {
		assert.NotContains(t, []string{capcheck.RuleCNPRate, capcheck.RuleCNPMissing}, v.Rule, "%v", v)
	}
	assert.Equal(t, int(sent), rep.CNPsJudged, "each CNP the NICs sent judged once, on its receiver's link")
}
