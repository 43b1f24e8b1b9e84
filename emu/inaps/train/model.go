package train

import (
	"embed"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"strconv"
	"strings"
	"time"
)

// Limits of a model file. They keep every derived quantity (bytes,
// fragment sequence numbers, summed times) inside its integer type and a
// fuzzed file from allocating without bound.
const (
	MaxLayers     = 64
	MaxPartitions = 1 << 16               // tensor partitions in a model
	MaxFragments  = math.MaxUint32        // fragments in an iteration: FirstSeq is a uint32
	maxInput      = 1 << 20               // bytes of a model file
	maxTime       = 1_000_000_000_000_000 // ns of one layer's pass (11.6 days)
)

// Layer is one row of a model file.
type Layer struct {
	Index      int64 // layer_index as written (increasing)
	Numel      int64 // values (int32 on the wire)
	Forward    time.Duration
	Backward   time.Duration
	Partitions int
}

// Model is a parsed model file: its layers, front (l = 1) to back.
type Model struct {
	Name   string
	Layers []Layer
	// CommComp is the Comm/Comp of the priority's Eq. (1); 0 means unset:
	// measured from the previous iteration (1 in the first).
	CommComp float64
}

// Bytes is the model's gradient volume: 4 bytes a value.
func (m *Model) Bytes() int64 {
	var n int64
	for _, l := range m.Layers {
		n += 4 * l.Numel
	}
	return n
}

// Compute is an iteration's summed forward and backward compute.
func (m *Model) Compute() time.Duration {
	var d time.Duration
	for _, l := range m.Layers {
		d += l.Forward + l.Backward
	}
	return d
}

//go:embed models/*.csv
var builtins embed.FS

// builtinFiles maps the names LoadModel accepts to the embedded files.
var builtinFiles = map[string]string{"A": "dnnA", "dnnA": "dnnA", "B": "dnnB", "dnnB": "dnnB"}

// LoadModel reads a builtin model (A or dnnA, B or dnnB: ESA's simulated
// DNNs) or a model file at the path spec.
func LoadModel(spec string) (*Model, error) {
	if b, ok := builtinFiles[spec]; ok {
		f, err := builtins.Open("models/" + b + ".csv")
		if err != nil {
			return nil, err
		}
		defer f.Close()
		return ParseModel(b+".csv", f)
	}
	f, err := os.Open(spec)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) && !strings.ContainsAny(spec, `./\`) {
			return nil, fmt.Errorf("model %q: no such builtin or file (builtins: A or dnnA, B or dnnB)", spec)
		}
		return nil, err
	}
	defer f.Close()
	return ParseModel(spec, f)
}

// columns of a model file: the first four are dnn_benchmark's, required.
var columns = []string{"layer_index", "numel", "forward_pass_ns", "backward_pass_ns", "partitions", "comm_comp"}

const required = 4

// field is one comma-separated cell, trimmed, with its 1-based byte column.
type field struct {
	s   string
	col int
}

func splitFields(line string) []field {
	var fs []field
	start := 0
	for {
		end := strings.IndexByte(line[start:], ',')
		cell := line[start:]
		if end >= 0 {
			cell = line[start : start+end]
		}
		lead := len(cell) - len(strings.TrimLeft(cell, " \t"))
		fs = append(fs, field{strings.TrimSpace(cell), start + lead + 1})
		if end < 0 {
			return fs
		}
		start += end + 1
	}
}

// ParseModel reads a model in SwitchML dnn_benchmark's CSV format: a
// header row naming the columns layer_index, numel, forward_pass_ns,
// backward_pass_ns and optionally partitions (default 1) and comm_comp
// (default 0: unset), in any order, then one row a layer, front to back.
// Values are 64-bit integers (comm_comp a decimal); spaces around cells,
// blank lines and # comments are allowed. An error is one line,
// "name:line:column: …" (name:line or name alone when it is about a
// whole row or the whole file); it quotes what it read, so a stray
// newline cannot split it.
func ParseModel(name string, r io.Reader) (*Model, error) {
	data, err := io.ReadAll(io.LimitReader(r, maxInput+1))
	if err != nil {
		return nil, fmt.Errorf("%s: %v", name, err)
	}
	if len(data) > maxInput {
		return nil, fmt.Errorf("%s: larger than 1 MiB", name)
	}
	m := &Model{Name: name}
	var (
		pos       []int // pos[c] = cell index of columns[c], -1 if absent
		ncells    int
		parts     int
		frags     int64
		commLine  int
		lastIndex int64
	)
	for i, raw := range strings.Split(string(data), "\n") {
		line := i + 1
		text, _, _ := strings.Cut(raw, "#")
		if strings.TrimSpace(text) == "" {
			continue
		}
		cells := splitFields(text)
		at := func(f field, format string, a ...any) error {
			return fmt.Errorf("%s:%d:%d: %s", name, line, f.col, fmt.Sprintf(format, a...))
		}
		if pos == nil {
			if pos, err = header(cells, at); err != nil {
				return nil, err
			}
			ncells = len(cells)
			continue
		}
		if len(cells) != ncells {
			return nil, fmt.Errorf("%s:%d: %d cells, the header has %d", name, line, len(cells), ncells)
		}
		if len(m.Layers) == MaxLayers {
			return nil, at(cells[0], "more than %d layers", MaxLayers)
		}
		var v [5]int64
		for c := 0; c < 5; c++ {
			v[c] = 1 // partitions' default
			if pos[c] < 0 {
				continue
			}
			f := cells[pos[c]]
			n, err := strconv.ParseInt(f.s, 10, 64)
			if err != nil {
				return nil, at(f, "%s: %q is not a 64-bit integer", columns[c], f.s)
			}
			v[c] = n
		}
		cell := func(c int) field { return cells[pos[c]] }
		switch l := (Layer{Index: v[0], Numel: v[1], Forward: time.Duration(v[2]), Backward: time.Duration(v[3])}); {
		case l.Index < 0:
			return nil, at(cell(0), "layer_index %d is negative", l.Index)
		case len(m.Layers) > 0 && l.Index <= lastIndex:
			return nil, at(cell(0), "layer_index %d after %d: layers must be listed in increasing order, once each", l.Index, lastIndex)
		case l.Numel <= 0:
			return nil, at(cell(1), "numel %d: a layer needs at least one value", l.Numel)
		case l.Forward < 0 || l.Forward > maxTime:
			return nil, at(cell(2), "forward_pass_ns %d is out of [0, %d]", v[2], int64(maxTime))
		case l.Backward < 0 || l.Backward > maxTime:
			return nil, at(cell(3), "backward_pass_ns %d is out of [0, %d]", v[3], int64(maxTime))
		case v[4] < 1 || v[4] > l.Numel:
			return nil, at(cellOr(cells, pos[4], cells[0]), "partitions %d is out of [1, numel %d]", v[4], l.Numel)
		case int64(parts)+v[4] > MaxPartitions:
			return nil, at(cellOr(cells, pos[4], cells[0]), "more than %d partitions in the model", MaxPartitions)
		default:
			l.Partitions = int(v[4])
			frags += layerFragments(l)
			if frags > MaxFragments {
				return nil, at(cell(1), "more than %d fragments of %d values in the model", int64(MaxFragments), Values)
			}
			parts += l.Partitions
			lastIndex = l.Index
			m.Layers = append(m.Layers, l)
		}
		if pos[5] >= 0 {
			f := cells[pos[5]]
			cc, err := strconv.ParseFloat(f.s, 64)
			switch {
			case err != nil || math.IsNaN(cc) || math.IsInf(cc, 0):
				return nil, at(f, "comm_comp: %q is not a finite number", f.s)
			case cc < 0:
				return nil, at(f, "comm_comp %v is negative", cc)
			case commLine > 0 && cc != m.CommComp:
				return nil, at(f, "comm_comp %v differs from line %d's %v: it is the job's, one value", cc, commLine, m.CommComp)
			}
			m.CommComp, commLine = cc, line
		}
	}
	if pos == nil {
		return nil, fmt.Errorf("%s: no header row (want %s)", name, strings.Join(columns[:required], ", "))
	}
	if len(m.Layers) == 0 {
		return nil, fmt.Errorf("%s: no layers", name)
	}
	return m, nil
}

func cellOr(cells []field, i int, f field) field {
	if i < 0 {
		return f
	}
	return cells[i]
}

// header maps the columns to the header row's cells.
func header(cells []field, at func(field, string, ...any) error) ([]int, error) {
	pos := make([]int, len(columns))
	for i := range pos {
		pos[i] = -1
	}
	for i, f := range cells {
		if _, err := strconv.ParseFloat(f.s, 64); err == nil {
			return nil, at(f, "a header row naming the columns must come first (want %s), not %q", strings.Join(columns[:required], ", "), f.s)
		}
		c := columnOf(f.s)
		switch {
		case c < 0:
			return nil, at(f, "unknown column %q (known: %s)", f.s, strings.Join(columns, ", "))
		case pos[c] >= 0:
			return nil, at(f, "column %s named twice", columns[c])
		}
		pos[c] = i
	}
	for c := 0; c < required; c++ {
		if pos[c] < 0 {
			return nil, at(cells[0], "missing column %s", columns[c])
		}
	}
	return pos, nil
}

func columnOf(s string) int {
	for c, name := range columns {
		if strings.EqualFold(s, name) {
			return c
		}
	}
	return -1
}
