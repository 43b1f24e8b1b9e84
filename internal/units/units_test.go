package units

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParseRate(t *testing.T) {
	for in, want := range map[string]float64{
		"10G":      1e10,
		"25Gbit":   25e9,
		"25gbit":   25e9,
		"100gbps":  8e11, // tc: bps is bytes per second
		"100Gbps":  8e11,
		"400M":     4e8,
		"400mbit":  4e8,
		"2.5G":     2.5e9,
		"1T":       1e12,
		"10Gbit/s": 1e10,
		"1000000":  1e6,
		" 40G ":    40e9,
		"10T":      1e13,
		"1000k":    1e6,
	} {
		got, err := ParseRate(in)
		if assert.NoError(t, err, in) {
			assert.Equal(t, want, got, in)
		}
	}
	for _, in := range []string{"", "G", "fast", "0", "0G", "-10G", "10X", "100k", "11T", "Inf", "1e400", "10 G b"} {
		_, err := ParseRate(in)
		assert.Error(t, err, "%q", in)
	}
}

// NaN is not a rate: ParseRate must reject it (strconv.ParseFloat accepts
// "NaN", and every range comparison with NaN is false).
func TestParseRateRejectsNaN(t *testing.T) {
	for _, in := range []string{"NaN", "nan", "NaNG", "nanbit"} {
		v, err := ParseRate(in)
		assert.Error(t, err, "ParseRate(%q) = %v", in, v)
	}
}

func TestParseSize(t *testing.T) {
	for in, want := range map[string]int64{
		"64MiB":  64 << 20,
		"4MB":    4_000_000,
		"1000":   1000,
		"1.5KiB": 1536,
		"512KiB": 512 << 10,
		"1GiB":   1 << 30,
		"2GB":    2_000_000_000,
		"7B":     7,
		"3KB":    3000,
		" 16MiB": 16 << 20,
	} {
		got, err := ParseSize(in)
		if assert.NoError(t, err, in) {
			assert.Equal(t, want, got, in)
		}
	}
	for _, in := range []string{"", "1.3B", "0", "-4MiB", "MiB", "lots", "4 MiB MiB", "1.0000001KiB", "NaN", "Inf", "2000GiB", "1e300"} {
		_, err := ParseSize(in)
		assert.Error(t, err, "%q", in)
	}
}

func TestFormatRoundTrip(t *testing.T) {
	for _, n := range []int64{1000, 4096, 16 << 20, 3 << 30, 1536, 64<<20 + 1} {
		back, err := ParseSize(FormatSize(n))
		require.NoError(t, err, FormatSize(n))
		assert.Equal(t, n, back, FormatSize(n))
	}
	assert.Equal(t, "16MiB", FormatSize(16<<20))
	assert.Equal(t, "1000B", FormatSize(1000))
	for _, r := range []float64{1e10, 2.5e9, 4e8, 1e11, 25e9, 1e12} {
		back, err := ParseRate(FormatRate(r))
		require.NoError(t, err, FormatRate(r))
		assert.Equal(t, r, back, FormatRate(r))
	}
	assert.Equal(t, "10G", FormatRate(1e10))
	assert.Equal(t, "2.5G", FormatRate(2.5e9))
	assert.Equal(t, "400M", FormatRate(4e8))
}

func TestFormatBytes(t *testing.T) {
	for n, want := range map[int64]string{
		100: "100 B", 1 << 20: "1 MiB", 1536 << 20: "1.5 GiB", 270 << 30: "270 GiB", 1<<40 + 1<<39: "1.5 TiB", 12 << 10: "12 KiB",
	} {
		assert.Equal(t, want, FormatBytes(n))
	}
}
