// Command benchtable reads `go test -bench` output (make bench) and prints
// one table: each benchmark's own figure beside the raw limit measured in
// the same process (crc32, a raw I/O loop, memcpy-speed transport) and
// their ratio, as the median over the -count rounds. A benchmark that
// measures no raw limit says so instead of getting one made up.
//
//	go test -run '^$' -bench . -count 5 ./frames/ ... | tee bench.out
//	go run ./internal/benchtable < bench.out
//
// It exits 1 when the input holds no benchmark result or a FAIL line (a
// benchmark that failed), so that make bench fails too.
package main

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"slices"
	"sort"
	"strings"
	"text/tabwriter"

	"golang.org/x/perf/benchfmt"
)

func main() { os.Exit(run(os.Stdin, os.Stdout, os.Stderr)) }

// ratioUnits are the metrics benchmarks report as their figure over the
// raw limit measured beside it.
var ratioUnits = []string{"ratio", "x_crc32", "x_raw"}

// targets are the ratios the benchmarks' doc comments set as goals
// (frames/bench_test.go: the ICRC at crc32 speed for 1 KiB payloads).
var targets = map[string]string{
	"ICRC/v2-ipv4/1KiB": ">= 0.9",
	"ICRC/v2-ipv6/1KiB": ">= 0.9",
	"ICRC/v1/1KiB":      ">= 0.9",
}

// row is one benchmark's medians.
type row struct {
	pkg, name string
	values    map[string][]float64
	order     []string // units in the order first seen
}

func run(in io.Reader, out, errw io.Writer) int {
	rows, failed, err := read(in)
	if err != nil {
		fmt.Fprintf(errw, "benchtable: %v\n", err)
		return 1
	}
	if len(rows) == 0 {
		fmt.Fprintln(errw, "benchtable: no benchmark results in the input")
		return 1
	}
	write(out, rows)
	if failed {
		fmt.Fprintln(errw, "benchtable: a benchmark failed (FAIL in the input)")
		return 1
	}
	return 0
}

// read collects every result's values per benchmark (package and name).
func read(in io.Reader) ([]*row, bool, error) {
	var buf bytes.Buffer
	failed := false
	sc := bufio.NewScanner(io.TeeReader(in, &buf))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if strings.HasPrefix(sc.Text(), "FAIL") || strings.HasPrefix(sc.Text(), "--- FAIL") {
			failed = true
		}
	}
	if err := sc.Err(); err != nil {
		return nil, false, err
	}
	byKey := map[string]*row{}
	var rows []*row
	r := benchfmt.NewReader(&buf, "bench output")
	for r.Scan() {
		res, ok := r.Result().(*benchfmt.Result)
		if !ok {
			continue // syntax errors are go test's other lines
		}
		pkg := res.GetConfig("pkg")
		name := string(res.Name.Full())
		if i := strings.LastIndexByte(name, '-'); i > 0 && strings.Trim(name[i+1:], "0123456789") == "" {
			name = name[:i] // the GOMAXPROCS suffix
		}
		k := pkg + " " + name
		rw := byKey[k]
		if rw == nil {
			rw = &row{pkg: pkg, name: name, values: map[string][]float64{}}
			byKey[k] = rw
			rows = append(rows, rw)
		}
		for _, v := range res.Values {
			unit, val := v.Unit, v.Value // as written, unless the reader tidied it
			if v.OrigUnit != "" {
				unit, val = v.OrigUnit, v.OrigValue
			}
			if _, seen := rw.values[unit]; !seen {
				rw.order = append(rw.order, unit)
			}
			rw.values[unit] = append(rw.values[unit], val)
		}
	}
	return rows, failed, r.Err()
}

// median of the rounds (the lower middle of an even count).
func median(v []float64) float64 {
	s := slices.Clone(v)
	sort.Float64s(s)
	return s[(len(s)-1)/2]
}

func isLimit(unit string) bool {
	return !slices.Contains(ratioUnits, unit) && (strings.Contains(unit, "crc32") || strings.Contains(unit, "raw"))
}

func isStandard(unit string) bool {
	switch unit {
	case "ns/op", "B/op", "allocs/op", "MB/s":
		return true
	}
	return false
}

func write(out io.Writer, rows []*row) {
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "package\tbenchmark\tfigure\traw limit\tratio\ttarget\trounds\tallocs/op")
	for _, rw := range rows {
		var fig, lim []string
		ratio := "no raw limit"
		rounds := 0
		for _, u := range rw.order {
			m := median(rw.values[u])
			rounds = max(rounds, len(rw.values[u]))
			switch {
			case slices.Contains(ratioUnits, u):
				ratio = fmt.Sprintf("%.3f", m)
			case isLimit(u):
				lim = append(lim, fmt.Sprintf("%.4g %s", m, u))
			case !isStandard(u):
				fig = append(fig, fmt.Sprintf("%.4g %s", m, u))
			}
		}
		if len(fig) == 0 {
			fig = []string{fmt.Sprintf("%.4g ns/op", median(rw.values["ns/op"]))}
		}
		allocs := "-"
		if a, ok := rw.values["allocs/op"]; ok {
			allocs = fmt.Sprintf("%.0f", median(a))
		}
		if strings.HasSuffix(rw.name, "/crc32") || strings.HasSuffix(rw.name, "/copy") {
			ratio = "(a raw limit)"
		}
		target := targets[rw.name]
		if target == "" {
			target = "-"
		}
		if len(lim) == 0 {
			lim = []string{"-"}
		}
		pkg := strings.TrimPrefix(rw.pkg, "github.com/inaemu/inaemu/")
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%d\t%s\n", pkg, rw.name, strings.Join(fig, ", "), strings.Join(lim, ", "), ratio, target, rounds, allocs)
	}
	tw.Flush()
}
