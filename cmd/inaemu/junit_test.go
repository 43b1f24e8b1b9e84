package main

import (
	"encoding/xml"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/inaemu/inaemu/internal/junit"
)

// junitDoc is the part of a JUnit report the tests read.
type junitDoc struct {
	Suites []struct {
		Cases []struct {
			Name    string `xml:"name,attr"`
			Skipped *struct {
				Message string `xml:"message,attr"`
			} `xml:"skipped"`
			Failures []struct {
				Message string `xml:"message,attr"`
				Type    string `xml:"type,attr"`
				Text    string `xml:",chardata"`
			} `xml:"failure"`
		} `xml:"testcase"`
	} `xml:"testsuite"`
}

func readJUnit(t *testing.T, path string) junitDoc {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	require.NoError(t, junit.Validate(b), string(b))
	var d junitDoc
	require.NoError(t, xml.Unmarshal(b, &d))
	require.Len(t, d.Suites, 1)
	return d
}

// check --junit: a testcase per rule, a failure per violation naming its
// frame; the exit status is check's.
func TestCheckJUnit(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "check.xml")
	code, text, errOut := runCLI("check", checkGolden("psn_order.pcapng"), "--vantage", "sender", "--junit", out)
	assert.Equal(t, 1, code, errOut)
	d := readJUnit(t, out)
	byName := map[string]int{}
	for i, c := range d.Suites[0].Cases {
		byName[c.Name] = i
	}
	for _, r := range checkRules {
		assert.Contains(t, byName, r)
	}
	c := d.Suites[0].Cases[byName["psn-order"]]
	require.Len(t, c.Failures, strings.Count(text, "\npsn-order frame ")+strings.Count(text[:min(len(text), 10)], "psn-order"))
	for _, f := range c.Failures {
		assert.Equal(t, "psn-order", f.Type)
		assert.Regexp(t, `^psn-order frame \d+ `, f.Message)
		assert.Contains(t, text, f.Message, "the text report's line")
		assert.Regexp(t, `^frame \d+ \(index \d+\)`, f.Text)
	}
	assert.Empty(t, d.Suites[0].Cases[byName["icrc"]].Failures)

	// A capture that conforms: exit 0, every rule a testcase, none failed.
	code, _, errOut = runCLI("check", checkGolden("netreduce_clean.pcapng"), "--junit", out)
	require.Equal(t, 0, code, errOut)
	d = readJUnit(t, out)
	require.NotEmpty(t, d.Suites[0].Cases)
	for _, c := range d.Suites[0].Cases {
		assert.Empty(t, c.Failures, c.Name)
	}

	// A report that cannot be written: exit 74, one line.
	code, _, errOut = runCLI("check", checkGolden("psn_order.pcapng"), "--vantage", "sender", "--junit", filepath.Join(dir, "no", "such", "dir.xml"))
	assert.Equal(t, exitIO, code)
	assert.Equal(t, 1, strings.Count(errOut, "\n"), errOut)
	assert.True(t, strings.HasPrefix(errOut, "inaemu check: --junit "), errOut)
}

// conformance --junit: a testcase per property; a failing property's
// failure carries its counterexample and replay command.
func TestConformanceJUnit(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "c.xml")
	code, _, errOut := runCLI("conformance", "--suite", "gbn", "--count", "3", "--seed", "1", "--junit", out)
	require.Equal(t, 0, code, errOut)
	d := readJUnit(t, out)
	require.Len(t, d.Suites[0].Cases, 1)
	assert.Equal(t, "gbn", d.Suites[0].Cases[0].Name)
	assert.Empty(t, d.Suites[0].Cases[0].Failures)

	code, _, errOut = runCLI("conformance", "--suite", "aggregation", "--release", "paper", "--count", "200", "--seed", "1", "--out", dir, "--junit", out)
	require.Equal(t, 1, code, errOut)
	d = readJUnit(t, out)
	require.Len(t, d.Suites[0].Cases, 1)
	f := d.Suites[0].Cases[0].Failures
	require.Len(t, f, 1)
	assert.Equal(t, "aggregation/release=paper", f[0].Type)
	assert.Contains(t, f[0].Text, "counterexample: "+filepath.Join(dir, "aggregation-paper-"))
	assert.Contains(t, f[0].Text, "replay: inaemu run --scenario ")
}
