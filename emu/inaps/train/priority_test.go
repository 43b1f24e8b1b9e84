package train_test

import (
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/inaemu/inaemu/emu/inaps/train"
)

// At an iteration's start both of ESA's models have T_j = 1.92 ms
// (A: 16 MB at 100 Gb/s is 1.28 ms, plus 2 × 0.32 ms; B: 8 MB is 0.64 ms,
// plus 2 × 0.64 ms). By hand, × 32:
//
//	A, l=1: 1/1.92 × 2/1 × 2   = 2.0833 → 66.67 → 67
//	A, l=2: 1/1.92 × 2/2 × 2   = 1.0417 → 33.33 → 33
//	B, l=1: 1/1.92 × 2/1 × 0.5 = 0.5208 → 16.67 → 17
//	B, l=2: 1/1.92 × 2/2 × 0.5 = 0.2604 →  8.33 →  8
func TestPriorityESA(t *testing.T) {
	tj := 1920 * time.Microsecond
	for _, c := range []struct {
		cc    float64
		layer int
		want  uint8
	}{{2, 1, 67}, {2, 2, 33}, {0.5, 1, 17}, {0.5, 2, 8}} {
		require.Equal(t, c.want, train.Encode(train.Priority(tj, 2, c.layer, c.cc), 32), "%+v", c)
		require.Equal(t, c.want, train.Encode(train.Priority(tj, 2, c.layer, c.cc), 0), "default scale")
	}
}

func TestEncodeBounds(t *testing.T) {
	require.Equal(t, uint8(1), train.Encode(0, 32), "0 is reserved")
	require.Equal(t, uint8(1), train.Encode(0.01, 32))
	require.Equal(t, uint8(1), train.Encode(-3, 32))
	require.Equal(t, uint8(1), train.Encode(math.NaN(), 32))
	require.Equal(t, uint8(255), train.Encode(8, 32), "256 caps at 255")
	require.Equal(t, uint8(255), train.Encode(1e9, 32))
	require.Equal(t, uint8(255), train.Encode(math.Inf(1), 32))
	require.Equal(t, uint8(3), train.Encode(2.5, 1), "round half away from zero")
	require.True(t, math.IsInf(train.Priority(0, 2, 1, 1), 1))
	require.Equal(t, uint8(255), train.Encode(train.Priority(-time.Millisecond, 2, 1, 1), 32))
}
