// Package junit writes JUnit XML reports, the test report every CI system
// shows (Jenkins, GitLab, GitHub Actions' test reporters, Buildkite, ...):
// inaemu conformance --junit (a testcase per property) and inaemu check
// --junit (a testcase per rule, a failure per violation) write theirs
// here.
//
// The layout is the one of Ant's JUnit task as Jenkins' xunit plugin's
// junit-10.xsd describes it (Maven Surefire and pytest write the same):
//
//	<testsuites name tests failures errors skipped time>
//	  <testsuite name tests failures errors skipped time timestamp hostname>
//	    <properties><property name value/>...</properties>
//	    <testcase name classname time>
//	      <skipped message/> | <failure message type>text</failure>...
//	    </testcase>
//	  </testsuite>
//	</testsuites>
//
// Validate checks a document against that structure.
package junit

import (
	"encoding/xml"
	"fmt"
	"io"
	"strconv"
	"time"
)

// Report is a <testsuites> document.
type Report struct {
	Name   string
	Suites []Suite
}

// Suite is a <testsuite>: a run of one command on one input.
type Suite struct {
	Name       string
	Timestamp  time.Time // when it ran; written in UTC without a zone, as the schema wants
	Hostname   string
	Time       time.Duration
	Properties [][2]string // name, value: the run's settings (seed, file, ...)
	Cases      []Case
}

// Case is a <testcase>: one property or rule.
type Case struct {
	Name      string
	Classname string
	Time      time.Duration
	// Skipped, if set, says why the case was not run (nothing is judged).
	Skipped  string
	Failures []Failure
	// SystemOut is further text CI systems show with the case.
	SystemOut string
}

// Failure is one <failure>: a violation or a failed property.
type Failure struct {
	Message string // one line: what failed, with its frame numbers
	Type    string // the rule or property
	Text    string // details: counterexample, replay command, ...
}

type xmlReport struct {
	XMLName  xml.Name   `xml:"testsuites"`
	Name     string     `xml:"name,attr"`
	Tests    int        `xml:"tests,attr"`
	Failures int        `xml:"failures,attr"`
	Errors   int        `xml:"errors,attr"`
	Skipped  int        `xml:"skipped,attr"`
	Time     string     `xml:"time,attr"`
	Suites   []xmlSuite `xml:"testsuite"`
}

type xmlSuite struct {
	Name       string        `xml:"name,attr"`
	Tests      int           `xml:"tests,attr"`
	Failures   int           `xml:"failures,attr"`
	Errors     int           `xml:"errors,attr"`
	Skipped    int           `xml:"skipped,attr"`
	Time       string        `xml:"time,attr"`
	Timestamp  string        `xml:"timestamp,attr"`
	Hostname   string        `xml:"hostname,attr"`
	Properties []xmlProperty `xml:"properties>property"`
	Cases      []xmlCase     `xml:"testcase"`
}

type xmlProperty struct {
	Name  string `xml:"name,attr"`
	Value string `xml:"value,attr"`
}

type xmlCase struct {
	Name      string       `xml:"name,attr"`
	Classname string       `xml:"classname,attr"`
	Time      string       `xml:"time,attr"`
	Skipped   *xmlSkipped  `xml:"skipped"`
	Failures  []xmlFailure `xml:"failure"`
	SystemOut string       `xml:"system-out,omitempty"`
}

type xmlSkipped struct {
	Message string `xml:"message,attr"`
}

type xmlFailure struct {
	Message string `xml:"message,attr"`
	Type    string `xml:"type,attr"`
	Text    string `xml:",chardata"`
}

// seconds is a duration as the schema writes it: seconds, decimal.
func seconds(d time.Duration) string { return strconv.FormatFloat(d.Seconds(), 'f', 3, 64) }

// Write writes the report as an indented JUnit XML document. A case
// counts as a failure if it has any failure, as skipped if it is
// skipped; errors (a test that could not run) are not used.
func Write(w io.Writer, r Report) error {
	doc := xmlReport{Name: r.Name}
	var total time.Duration
	for _, s := range r.Suites {
		xs := xmlSuite{Name: s.Name, Time: seconds(s.Time), Hostname: s.Hostname, Tests: len(s.Cases), Cases: []xmlCase{}}
		if xs.Hostname == "" {
			xs.Hostname = "localhost"
		}
		if !s.Timestamp.IsZero() {
			xs.Timestamp = s.Timestamp.UTC().Format("2006-01-02T15:04:05")
		}
		for _, p := range s.Properties {
			xs.Properties = append(xs.Properties, xmlProperty{Name: p[0], Value: p[1]})
		}
		for _, c := range s.Cases {
			xc := xmlCase{Name: c.Name, Classname: c.Classname, Time: seconds(c.Time), SystemOut: c.SystemOut}
			switch {
			case c.Skipped != "":
				xc.Skipped = &xmlSkipped{Message: c.Skipped}
				xs.Skipped++
			case len(c.Failures) > 0:
				xs.Failures++
			}
			for _, f := range c.Failures {
				xc.Failures = append(xc.Failures, xmlFailure{Message: f.Message, Type: f.Type, Text: f.Text})
			}
			xs.Cases = append(xs.Cases, xc)
		}
		doc.Tests += xs.Tests
		doc.Failures += xs.Failures
		doc.Skipped += xs.Skipped
		total += s.Time
		doc.Suites = append(doc.Suites, xs)
	}
	doc.Time = seconds(total)
	if _, err := io.WriteString(w, xml.Header); err != nil {
		return err
	}
	enc := xml.NewEncoder(w)
	enc.Indent("", "  ")
	if err := enc.Encode(doc); err != nil {
		return err
	}
	_, err := io.WriteString(w, "\n")
	return err
}

// node is an element of a parsed document, for Validate.
type node struct {
	XMLName xml.Name
	Attrs   []xml.Attr `xml:",any,attr"`
	Nodes   []node     `xml:",any"`
	Text    string     `xml:",chardata"`
}

func (n node) attr(name string) (string, bool) {
	for _, a := range n.Attrs {
		if a.Name.Local == name {
			return a.Value, true
		}
	}
	return "", false
}

// need checks that n has the attributes, the numeric ones (ints or
// decimal seconds) parseable.
func (n node) need(where string, names ...string) error {
	for _, name := range names {
		v, ok := n.attr(name)
		if !ok {
			return fmt.Errorf("%s: <%s> has no %s attribute", where, n.XMLName.Local, name)
		}
		switch name {
		case "tests", "failures", "errors", "skipped":
			if i, err := strconv.Atoi(v); err != nil || i < 0 {
				return fmt.Errorf("%s: <%s %s=%q>: want a count", where, n.XMLName.Local, name, v)
			}
		case "time":
			if f, err := strconv.ParseFloat(v, 64); err != nil || f < 0 {
				return fmt.Errorf("%s: <%s time=%q>: want seconds", where, n.XMLName.Local, v)
			}
		case "timestamp":
			if _, err := time.Parse("2006-01-02T15:04:05", v); v != "" && err != nil {
				return fmt.Errorf("%s: <%s timestamp=%q>: want an ISO 8601 time without a zone", where, n.XMLName.Local, v)
			}
		}
	}
	return nil
}

func count(n node, name string) int {
	v, _ := n.attr(name)
	i, _ := strconv.Atoi(v)
	return i
}

// Validate checks a JUnit XML document against the structure of
// junit-10.xsd (see the package comment): the elements, where each may
// stand, their required attributes, and that the counts add up.
func Validate(b []byte) error {
	var root node
	if err := xml.Unmarshal(b, &root); err != nil {
		return err
	}
	if root.XMLName.Local != "testsuites" {
		return fmt.Errorf("root element <%s>, want <testsuites>", root.XMLName.Local)
	}
	if err := root.need("testsuites", "tests", "failures", "errors", "time"); err != nil {
		return err
	}
	tests, failures, skipped := 0, 0, 0
	for _, s := range root.Nodes {
		if s.XMLName.Local != "testsuite" {
			return fmt.Errorf("<testsuites> holds <%s>, want <testsuite>", s.XMLName.Local)
		}
		name, _ := s.attr("name")
		where := "testsuite " + strconv.Quote(name)
		if err := s.need(where, "name", "tests", "failures", "errors", "time", "timestamp", "hostname"); err != nil {
			return err
		}
		st, sf, ss := 0, 0, 0
		for _, c := range s.Nodes {
			switch c.XMLName.Local {
			case "properties":
				for _, p := range c.Nodes {
					if p.XMLName.Local != "property" {
						return fmt.Errorf("%s: <properties> holds <%s>", where, p.XMLName.Local)
					}
					if err := p.need(where, "name", "value"); err != nil {
						return err
					}
				}
			case "system-out", "system-err":
			case "testcase":
				st++
				cn, _ := c.attr("name")
				cw := where + " testcase " + strconv.Quote(cn)
				if err := c.need(cw, "name", "classname", "time"); err != nil {
					return err
				}
				failed, skip := false, false
				for _, e := range c.Nodes {
					switch e.XMLName.Local {
					case "failure", "error":
						if err := e.need(cw, "message", "type"); err != nil {
							return err
						}
						failed = true
					case "skipped":
						skip = true
					case "system-out", "system-err":
					default:
						return fmt.Errorf("%s: <testcase> holds <%s>", cw, e.XMLName.Local)
					}
				}
				if failed && skip {
					return fmt.Errorf("%s: both skipped and failed", cw)
				}
				if failed {
					sf++
				}
				if skip {
					ss++
				}
			default:
				return fmt.Errorf("%s: <testsuite> holds <%s>", where, c.XMLName.Local)
			}
		}
		if count(s, "tests") != st || count(s, "failures") != sf || count(s, "skipped") != ss {
			return fmt.Errorf("%s: counts tests=%d failures=%d skipped=%d, but it holds %d, %d failed, %d skipped", where, count(s, "tests"), count(s, "failures"), count(s, "skipped"), st, sf, ss)
		}
		tests, failures, skipped = tests+st, failures+sf, skipped+ss
	}
	if count(root, "tests") != tests || count(root, "failures") != failures || count(root, "skipped") != skipped {
		return fmt.Errorf("testsuites: counts tests=%d failures=%d skipped=%d, but its suites hold %d, %d, %d", count(root, "tests"), count(root, "failures"), count(root, "skipped"), tests, failures, skipped)
	}
	return nil
}
