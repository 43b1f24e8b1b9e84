package train_test

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/inaemu/inaemu/emu/inaps/train"
)

// The builtins are ESA's §7.2.1 models: DNN A 2 layers × 2,000,000 int32
// (8 MB a layer), 0.32 ms compute, 2 partitions, Comm/Comp 2; DNN B
// 2 × 1,000,000, 0.64 ms, 2 partitions, 0.5.
func TestBuiltins(t *testing.T) {
	for _, c := range []struct {
		specs    []string
		numel    int64
		forward  time.Duration
		commComp float64
	}{
		{[]string{"A", "dnnA"}, 2_000_000, 320 * time.Microsecond, 2},
		{[]string{"B", "dnnB"}, 1_000_000, 640 * time.Microsecond, 0.5},
	} {
		for _, spec := range c.specs {
			m, err := train.LoadModel(spec)
			require.NoError(t, err, spec)
			require.Len(t, m.Layers, 2)
			for i, l := range m.Layers {
				require.Equal(t, train.Layer{Index: int64(i), Numel: c.numel, Forward: c.forward, Partitions: 2}, l, spec)
			}
			require.Equal(t, c.commComp, m.CommComp)
			require.Equal(t, 8*c.numel, m.Bytes())
			require.Equal(t, 2*c.forward, m.Compute())
		}
	}
}

func TestLoadModelFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "m.csv")
	require.NoError(t, os.WriteFile(path, []byte("layer_index,numel,forward_pass_ns,backward_pass_ns\n0,10,1,2\n"), 0o644))
	m, err := train.LoadModel(path)
	require.NoError(t, err)
	require.Equal(t, path, m.Name)
	require.Equal(t, []train.Layer{{Numel: 10, Forward: 1, Backward: 2, Partitions: 1}}, m.Layers)
	require.Zero(t, m.CommComp)

	_, err = train.LoadModel("dnnC")
	require.EqualError(t, err, `model "dnnC": no such builtin or file (builtins: A or dnnA, B or dnnB)`)
	_, err = train.LoadModel(filepath.Join(t.TempDir(), "none.csv"))
	require.ErrorContains(t, err, "no such file")
	require.NotContains(t, err.Error(), "builtin")
}

// Whitespace, comments, CRLF, blank lines, any column order and case.
func TestParseModelTolerant(t *testing.T) {
	in := "# a model\r\n\n  Numel ,layer_index,\tbackward_pass_ns, forward_pass_ns , comm_comp,partitions # trailing\r\n" +
		" 100 , 3 , 5, 7, 1.5, 3\r\n\n# between\n200,9,0,8,1.5,1 # done\n"
	m, err := train.ParseModel("t.csv", strings.NewReader(in))
	require.NoError(t, err)
	require.Equal(t, []train.Layer{
		{Index: 3, Numel: 100, Forward: 7, Backward: 5, Partitions: 3},
		{Index: 9, Numel: 200, Forward: 8, Backward: 0, Partitions: 1},
	}, m.Layers)
	require.Equal(t, 1.5, m.CommComp)
}

func TestParseModelErrors(t *testing.T) {
	const h = "layer_index, numel, forward_pass_ns, backward_pass_ns"
	rows := func(n int) string {
		var b strings.Builder
		b.WriteString(h + "\n")
		for i := range n {
			b.WriteString(strconv.Itoa(i) + ",62,0,0\n")
		}
		return b.String()
	}
	for _, c := range []struct{ in, want string }{
		{"", "m.csv: no header row (want layer_index, numel, forward_pass_ns, backward_pass_ns)"},
		{"# only a comment\n\n", "m.csv: no header row"},
		{h + "\n", "m.csv: no layers"},
		{"0,1,2,3\n", `m.csv:1:1: a header row naming the columns must come first (want layer_index, numel, forward_pass_ns, backward_pass_ns), not "0"`},
		{"layer_index, numel, forward_pass_ns\n0,1,2\n", "m.csv:1:1: missing column backward_pass_ns"},
		{"layer_index, numel, forward_pass_ns, backwards\n", `m.csv:1:38: unknown column "backwards" (known: layer_index, numel, forward_pass_ns, backward_pass_ns, partitions, comm_comp)`},
		{h + ", numel\n", "m.csv:1:56: column numel named twice"},
		{h + ",\n", `m.csv:1:55: unknown column ""`},
		{h + "\n0,1,2\n", "m.csv:2: 3 cells, the header has 4"},
		{h + "\n0,1,2,3,4\n", "m.csv:2: 5 cells, the header has 4"},
		{h + "\n0, x1, 2, 3\n", `m.csv:2:4: numel: "x1" is not a 64-bit integer`},
		{h + "\n0, 1.5, 2, 3\n", `m.csv:2:4: numel: "1.5" is not a 64-bit integer`},
		{h + "\n0, 1, 2, 99999999999999999999\n", `m.csv:2:10: backward_pass_ns: "99999999999999999999" is not a 64-bit integer`},
		{h + "\n0, 1, , 3\n", `m.csv:2:7: forward_pass_ns: "" is not a 64-bit integer`},
		{h + "\n0, 0, 2, 3\n", "m.csv:2:4: numel 0: a layer needs at least one value"},
		{h + "\n0, -5, 2, 3\n", "m.csv:2:4: numel -5: a layer needs at least one value"},
		{h + "\n0, 1, -2, 3\n", "m.csv:2:7: forward_pass_ns -2 is out of [0, 1000000000000000]"},
		{h + "\n0, 1, 2, -3\n", "m.csv:2:10: backward_pass_ns -3 is out of [0, 1000000000000000]"},
		{h + "\n0, 1, 2000000000000000, 3\n", "m.csv:2:7: forward_pass_ns 2000000000000000 is out of [0, 1000000000000000]"},
		{h + "\n-1, 1, 2, 3\n", "m.csv:2:1: layer_index -1 is negative"},
		{h + "\n0,1,2,3\n0,1,2,3\n", "m.csv:3:1: layer_index 0 after 0: layers must be listed in increasing order, once each"},
		{h + "\n1,1,2,3\n0,1,2,3\n", "m.csv:3:1: layer_index 0 after 1: layers must be listed in increasing order, once each"},
		{h + ", partitions\n0,1,2,3,0\n", "m.csv:2:9: partitions 0 is out of [1, numel 1]"},
		{h + ", partitions\n0,5,2,3,6\n", "m.csv:2:9: partitions 6 is out of [1, numel 5]"},
		{h + ", partitions\n0,100000,2,3,65536\n1,10,2,3,1\n", "m.csv:3:10: more than 65536 partitions in the model"},
		{h + "\n0,9223372036854775807,0,0\n", "m.csv:2:3: more than 4294967295 fragments of 62 values in the model"},
		{h + ", comm_comp\n0,1,2,3,x\n", `m.csv:2:9: comm_comp: "x" is not a finite number`},
		{h + ", comm_comp\n0,1,2,3,NaN\n", `m.csv:2:9: comm_comp: "NaN" is not a finite number`},
		{h + ", comm_comp\n0,1,2,3,-Inf\n", `m.csv:2:9: comm_comp: "-Inf" is not a finite number`},
		{h + ", comm_comp\n0,1,2,3,-1\n", "m.csv:2:9: comm_comp -1 is negative"},
		{h + ", comm_comp\n0,1,2,3,2\n1,1,2,3,0.5\n", "m.csv:3:9: comm_comp 0.5 differs from line 2's 2: it is the job's, one value"},
		{rows(65), "m.csv:66:1: more than 64 layers"},
		{h + "\n" + strings.Repeat("#", 1<<20), "m.csv: larger than 1 MiB"},
		{"layer_index, numel\x00\n", `m.csv:1:14: unknown column "numel\x00"`},
	} {
		m, err := train.ParseModel("m.csv", strings.NewReader(c.in))
		require.Nil(t, m, c.in)
		require.Error(t, err, c.in)
		require.True(t, strings.HasPrefix(err.Error(), c.want), "got %q, want %q", err, c.want)
		require.NotContains(t, err.Error(), "\n")
	}
	// 64 layers is the limit, not past it.
	m, err := train.ParseModel("m.csv", strings.NewReader(rows(64)))
	require.NoError(t, err)
	require.Len(t, m.Layers, 64)
}

func FuzzParseModel(f *testing.F) {
	for _, b := range []string{"dnnA", "dnnB"} {
		data, err := os.ReadFile("models/" + b + ".csv")
		if err != nil {
			f.Fatal(err)
		}
		f.Add(string(data))
	}
	f.Add("layer_index,numel,forward_pass_ns,backward_pass_ns,partitions\n0,10,1,1,3\n5,7,0,0,7\n")
	f.Add("numel,layer_index,backward_pass_ns,forward_pass_ns,comm_comp\n1,0,0,0,1e-3\n")
	f.Add("layer_index,numel,forward_pass_ns,backward_pass_ns\n0,,1\n")
	f.Fuzz(func(t *testing.T, in string) {
		m, err := train.ParseModel("f.csv", strings.NewReader(in))
		if err != nil {
			if m != nil || !strings.HasPrefix(err.Error(), "f.csv") || strings.Contains(err.Error(), "\n") {
				t.Fatalf("error %q with model %v", err, m)
			}
			return
		}
		if len(m.Layers) == 0 || len(m.Layers) > train.MaxLayers {
			t.Fatalf("%d layers", len(m.Layers))
		}
		for _, order := range []train.SendOrder{train.Reverse, train.ESA} {
			ps := m.Partitions(order)
			var numel, bytes int64
			seq := uint32(1)
			for i, p := range ps {
				if p.Pos != i || p.FirstSeq != seq || p.Numel < 1 || p.Bytes != 4*p.Numel {
					t.Fatalf("partition %d: %+v", i, p)
				}
				seq += uint32(p.Fragments)
				numel += p.Numel
				bytes += p.Bytes
			}
			if bytes != m.Bytes() || 4*numel != bytes {
				t.Fatalf("bytes %d, model %d", bytes, m.Bytes())
			}
		}
	})
}
