package junit

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func sample() Report {
	return Report{Name: "inaemu check", Suites: []Suite{{
		Name: "inaemu check x.pcapng", Timestamp: time.Date(2026, 11, 27, 18, 0, 0, 0, time.UTC), Hostname: "ci", Time: 1500 * time.Millisecond,
		Properties: [][2]string{{"file", "x.pcapng"}},
		Cases: []Case{
			{Name: "icrc", Classname: "inaemu.check"},
			{Name: "psn-order", Classname: "inaemu.check", Failures: []Failure{
				{Message: "psn-order frame 6 ...: skips PSN 102", Type: "psn-order", Text: "frame 6"},
				{Message: "psn-order frame 9 ...: <&\"'>", Type: "psn-order"},
			}},
			{Name: "agg-sum", Classname: "inaemu.check", Skipped: "no NetReduce results"},
		},
	}}}
}

// The document has the schema's structure: parsed back, every element
// stands where junit-10.xsd puts it, with its attributes, and the
// counts add up; text is escaped.
func TestWriteValidates(t *testing.T) {
	var b bytes.Buffer
	if err := Write(&b, sample()); err != nil {
		t.Fatal(err)
	}
	if err := Validate(b.Bytes()); err != nil {
		t.Fatalf("%v\n%s", err, b.String())
	}
	out := b.String()
	for _, want := range []string{`<?xml version="1.0" encoding="UTF-8"?>`, `<testsuites name="inaemu check" tests="3" failures="1" errors="0" skipped="1" time="1.500">`,
		`timestamp="2026-11-27T18:00:00" hostname="ci"`, `<property name="file" value="x.pcapng"></property>`,
		`<failure message="psn-order frame 6 ...: skips PSN 102" type="psn-order">frame 6</failure>`, `&lt;&amp;&#34;&#39;&gt;`, `<skipped message="no NetReduce results"></skipped>`} {
		if !strings.Contains(out, want) {
			t.Errorf("missing %s in\n%s", want, out)
		}
	}
	// xmllint and a JUnit XSD, where the machine has them (JUNIT_XSD names one).
	if xsd := os.Getenv("JUNIT_XSD"); xsd != "" {
		if _, err := exec.LookPath("xmllint"); err == nil {
			f := filepath.Join(t.TempDir(), "r.xml")
			_ = os.WriteFile(f, b.Bytes(), 0o644)
			if out, err := exec.Command("xmllint", "--noout", "--schema", xsd, f).CombinedOutput(); err != nil {
				t.Errorf("xmllint: %v\n%s", err, out)
			}
		}
	}
}

// Validate catches what the schema forbids.
func TestValidateRefuses(t *testing.T) {
	for doc, want := range map[string]string{
		`<testsuite/>`: "want <testsuites>",
		`<testsuites tests="1" failures="0" errors="0" time="0"><testsuite name="s" tests="1" failures="0" errors="0" time="0" timestamp="" hostname="h"><testcase name="a" time="0"/></testsuite></testsuites>`:                                            "no classname",
		`<testsuites tests="1" failures="0" errors="0" time="0"><testsuite name="s" tests="1" failures="0" errors="0" time="0" timestamp="" hostname="h"><testcase name="a" classname="c" time="0"><bogus/></testcase></testsuite></testsuites>`:            "holds <bogus>",
		`<testsuites tests="2" failures="0" errors="0" time="0"><testsuite name="s" tests="2" failures="0" errors="0" time="0" timestamp="" hostname="h"><testcase name="a" classname="c" time="0"/></testsuite></testsuites>`:                              "counts",
		`<testsuites tests="1" failures="1" errors="0" time="0"><testsuite name="s" tests="1" failures="1" errors="0" time="0" timestamp="" hostname="h"><testcase name="a" classname="c" time="0"><failure type="x"/></testcase></testsuite></testsuites>`: "no message",
	} {
		if err := Validate([]byte(doc)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Validate(%s) = %v, want %q", doc, err, want)
		}
	}
}
