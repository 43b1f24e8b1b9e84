package capcheck_test

import (
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/inaemu/inaemu/capcheck"
)

// docs/check.md shows what inaemu check prints for captures the tests
// here build with scapy: each sample is a ```text block after a
// `<!-- check-sample NAME -->` line, its first line the command
// ("$ inaemu check NAME.pcap [flags]"), the rest the report, which must
// be what the checker prints for that capture (TestDocsCheckSamples).
var docSampleRE = regexp.MustCompile("(?s)<!-- check-sample ([a-z-]+) -->\n```text\n\\$ inaemu check ([^\n]*)\n(.*?)```")

// docSamples builds the captures the samples name.
var docSamples = map[string]func(t *testing.T) string{
	"blame":       func(t *testing.T) string { return scapyCapture(t, "blame", blameWrongNAK(0)) },
	"undecidable": func(t *testing.T) string { return scapyCapture(t, "undecidable", pairUndecidable()) },
	"read": func(t *testing.T) string {
		return raCapture(t, "read", []rf{{Op: "read", PSN: 100, Len: 512}, {Op: "rfirst", PSN: 100, Len: 256}, {Op: "rlast", PSN: 102, Len: 256}})
	},
}

// TestDocsCheckSamples: every sample report in docs/check.md is what the
// checker prints (the flags a sample may give: --vantage).
func TestDocsCheckSamples(t *testing.T) {
	b, err := os.ReadFile("../docs/check.md")
	require.NoError(t, err)
	ms := docSampleRE.FindAllStringSubmatch(string(b), -1)
	require.NotEmpty(t, ms, "docs/check.md has no check-sample blocks")
	for _, m := range ms {
		name, args, want := m[1], strings.Fields(m[2]), m[3]
		build, ok := docSamples[name]
		require.True(t, ok, "sample %q: no capture of that name", name)
		require.Equal(t, name+".pcap", args[0], "sample %q", name)
		var opt capcheck.CheckOptions
		for i := 1; i < len(args); i++ {
			switch args[i] {
			case "--vantage":
				v, err := capcheck.ParseVantage(args[i+1])
				require.NoError(t, err)
				opt.Vantage = v
				i++
			default:
				t.Fatalf("sample %q: flag %q not handled here", name, args[i])
			}
		}
		rep, err := capcheck.CheckFile(build(t), opt)
		require.NoError(t, err)
		rep.File = name + ".pcap"
		var got strings.Builder
		require.NoError(t, rep.WriteText(&got))
		assert.Equal(t, want, got.String(), "sample %q", name)
	}
}
