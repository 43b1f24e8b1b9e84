package train_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/inaemu/inaemu/emu/inaps/train"
)

type lp struct{ layer, index int }

func layersOf(ps []train.Partition) []lp {
	var out []lp
	for _, p := range ps {
		out = append(out, lp{p.Layer, p.Index})
	}
	return out
}

// DNN A: 4 partitions of 1,000,000 values, ⌈10^6/62⌉ = 16,130 fragments
// each, 64,520 an iteration; the ESA order is L2P1, L1P1, L1P2, L2P2.
func TestPartitionsDNNA(t *testing.T) {
	m, err := train.LoadModel("A")
	require.NoError(t, err)
	ps := m.Partitions(train.ESA)
	require.Equal(t, []lp{{2, 1}, {1, 1}, {1, 2}, {2, 2}}, layersOf(ps))
	total := 0
	for i, p := range ps {
		require.Equal(t, int64(1_000_000), p.Numel)
		require.Equal(t, 16_130, p.Fragments)
		require.Equal(t, int64(4_000_000), p.Bytes)
		require.Equal(t, i, p.Pos)
		require.Equal(t, uint32(1+16_130*i), p.FirstSeq)
		total += p.Fragments
	}
	require.Equal(t, 64_520, total)
	require.Equal(t, []lp{{2, 1}, {2, 2}, {1, 1}, {1, 2}}, layersOf(m.Partitions(train.Reverse)))
}

// A layer splits into equal parts, the first numel%parts one larger;
// sequence numbers run on across the send order.
func TestPartitionsSplitAndOrders(t *testing.T) {
	m, err := train.ParseModel("m", strings.NewReader(
		"layer_index,numel,forward_pass_ns,backward_pass_ns,partitions\n0,10,0,0,3\n1,130,0,0,2\n2,5,0,0,2\n"))
	require.NoError(t, err)
	ps := m.Partitions(train.ESA)
	require.Equal(t, []lp{{3, 1}, {1, 1}, {1, 2}, {1, 3}, {2, 1}, {2, 2}, {3, 2}}, layersOf(ps))
	var numel []int64
	var frags []int
	var seqs []uint32
	for _, p := range ps {
		numel = append(numel, p.Numel)
		frags = append(frags, p.Fragments)
		seqs = append(seqs, p.FirstSeq)
	}
	require.Equal(t, []int64{3, 4, 3, 3, 65, 65, 2}, numel)
	require.Equal(t, []int{1, 1, 1, 1, 2, 2, 1}, frags)
	require.Equal(t, []uint32{1, 2, 3, 4, 5, 7, 9}, seqs)
	require.Equal(t, []lp{{3, 1}, {3, 2}, {2, 1}, {2, 2}, {1, 1}, {1, 2}, {1, 3}}, layersOf(m.Partitions(train.Reverse)))

	one, err := train.ParseModel("m", strings.NewReader("layer_index,numel,forward_pass_ns,backward_pass_ns,partitions\n0,10,0,0,2\n"))
	require.NoError(t, err)
	require.Equal(t, []lp{{1, 1}, {1, 2}}, layersOf(one.Partitions(train.ESA)))
}

func TestParseSendOrder(t *testing.T) {
	for _, o := range []train.SendOrder{train.Reverse, train.ESA} {
		got, err := train.ParseSendOrder(o.String())
		require.NoError(t, err)
		require.Equal(t, o, got)
	}
	_, err := train.ParseSendOrder("forward")
	require.EqualError(t, err, `send order "forward": want reverse or esa`)
}
