package capcheck_test

import (
	"fmt"
	"os"
	"reflect"
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

// TestDocsListTheRules: docs/check.md's rule list, the package doc's and
// docs/reports.md's JUnit testcases are capcheck.Rules, in its order.
func TestDocsListTheRules(t *testing.T) {
	var want strings.Builder
	want.WriteString("<!-- rules: capcheck.Rules, one line each (TestDocsListTheRules) -->\n")
	for _, r := range capcheck.Rules {
		fmt.Fprintf(&want, "- `%s`: %s (judged: `%s`)\n", r.Name, r.Doc, r.Counter)
	}
	b, err := os.ReadFile("../docs/check.md")
	require.NoError(t, err)
	m := regexp.MustCompile("(?s)<!-- rules:.*?-->\n.*?<!-- /rules -->").FindString(string(b))
	assert.Equal(t, want.String()+"<!-- /rules -->", m, "docs/check.md's rule list is capcheck.Rules (copy the expected block)")

	names := capcheck.RuleNames()
	b, err = os.ReadFile("../docs/reports.md")
	require.NoError(t, err)
	var quoted []string
	for _, n := range names {
		quoted = append(quoted, "`"+n+"`")
	}
	junit := regexp.MustCompile(`\s+`).ReplaceAllString(strings.Join(quoted, ", "), " ")
	flat := regexp.MustCompile(`\s+`).ReplaceAllString(string(b), " ")
	assert.Contains(t, flat, "a `<testcase>` per rule ("+junit+")", "docs/reports.md's JUnit testcases")

	b, err = os.ReadFile("doc.go")
	require.NoError(t, err)
	var inDoc []string
	for _, m := range regexp.MustCompile(`(?m)^//   - ([a-z-]+):`).FindAllStringSubmatch(string(b), -1) {
		inDoc = append(inDoc, m[1])
	}
	assert.ElementsMatch(t, names, inDoc, "the package doc's rule list")
}

// Every rule's counter is a field of the report (or of its streams).
func TestRuleCountersAreReportFields(t *testing.T) {
	fields := func(v any) map[string]bool {
		m := map[string]bool{}
		ty := reflect.TypeOf(v)
		for i := range ty.NumField() {
			name, _, _ := strings.Cut(ty.Field(i).Tag.Get("json"), ",")
			m[name] = true
		}
		return m
	}
	rep, stream := fields(capcheck.Report{}), fields(capcheck.StreamReport{})
	seen := map[string]bool{}
	for _, r := range capcheck.Rules {
		assert.False(t, seen[r.Name], "rule %s listed twice", r.Name)
		seen[r.Name] = true
		assert.NotEmpty(t, r.Doc, r.Name)
		assert.NotEmpty(t, r.Family, r.Name)
		if f, ok := strings.CutPrefix(r.Counter, "streams[]."); ok {
			assert.True(t, stream[f], "rule %s: counter %s is no field of a stream", r.Name, r.Counter)
		} else {
			assert.True(t, rep[r.Counter], "rule %s: counter %s is no field of the report", r.Name, r.Counter)
		}
	}
}
