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
// Bytes that are not UTF-8 are refused, not a panic (the unit's search
// had lowercased them into longer text and cut it at the wrong index;
// found by FuzzTopology).
func TestParseRateRejectsNonUTF8(t *testing.T) {
	for _, in := range []string{"\xffA", "1\xffG", "\xff", "10G\xff", "\xc3\x28gbit"} {
		_, err := ParseRate(in)
		assert.Error(t, err, "%q", in)
		assert.Empty(t, RateNote(in))
	}
}

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

// Every spelling of tc's rate table (get_rate64, iproute2
// lib/utils_math.c; tc(8) RATES) means what tc means, in any case; tc's
// bps units are bytes. inaemu's own spellings (a bare SI prefix, bit/s)
// are bits.
func TestRatesAsTCReadsThem(t *testing.T) {
	for in, want := range map[string]float64{
		// tc's table, bits.
		"25000000bit": 25e6, "1e9": 1e9, "1000000": 1e6, "5000kbit": 5e6, "100mbit": 1e8, "10gbit": 1e10, "1tbit": 1e12,
		"1024kibit": 1 << 20, "100mibit": 100 << 20, "10gibit": 10 << 30, "1tibit": 1 << 40,
		// tc's table, bytes.
		"125000000bps": 1e9, "125000kbps": 1e9, "125mbps": 1e9, "10gbps": 8e10, "1tbps": 8e12,
		"128kibps": 8 << 17, "100mibps": 800 << 20, "1gibps": 8 << 30,
		// Case does not matter to strcasecmp.
		"10GBIT": 1e10, "10Gbit": 1e10, "10GBps": 8e10, "10GbPs": 8e10, "10MiBit": 10 << 20,
		// strtod's numbers.
		"2.5gbit": 2.5e9, "1e1gbit": 1e10, "+10gbit": 1e10,
		// inaemu's: a bare SI prefix and bit/s are bits.
		"10G": 1e10, "400m": 4e8, "10Gbit/s": 1e10, "1T": 1e12,
	} {
		got, err := ParseRate(in)
		if assert.NoError(t, err, in) {
			assert.InDelta(t, want, got, want*1e-12, in)
		}
	}
	// tc refuses these, and so does inaemu.
	for _, in := range []string{"-10gbit", "10 gbit", "10gbits", "10gb", "10gib", "10bytes", "10g bit", "gbit"} {
		_, err := ParseRate(in)
		assert.Error(t, err, in)
	}
}

// The spellings that read differently than a user may expect get a note;
// bits in SI units do not.
func TestRateNote(t *testing.T) {
	assert.Equal(t, "10Gbps is 80 Gbit/s: tc reads 'bps' as bytes per second; write 10Gbit or 10G for bits", RateNote("10Gbps"))
	assert.Equal(t, "100mbps is 800 Mbit/s: tc reads 'bps' as bytes per second; write 100mbit or 100M for bits", RateNote("100mbps"))
	assert.Contains(t, RateNote("1GiBps"), "1GiBps is 8.59 Gbit/s: tc reads 'bps' as bytes per second; write 1Gibit for bits")
	assert.Equal(t, "10gibit is 10.737 Gbit/s: tc reads ki, mi, gi and ti as binary prefixes (2^10 ... 2^40); write 10gbit for powers of ten", RateNote("10gibit"))
	for _, s := range []string{"10G", "10gbit", "25Gbit", "100mbit", "1e10", "10Gbit/s", "fast"} {
		assert.Empty(t, RateNote(s), s)
	}
}

func TestSig3(t *testing.T) {
	for v, want := range map[float64]string{0: "0", 0.000123456: "0.000123", 0.0868: "0.0868", 0.86849: "0.868", 1.5249: "1.52",
		9.996: "10.0", 12.34: "12.3", 123.4: "123", 1234.6: "1235", -2.5: "-2.50", 0.001: "0.00100"} {
		if got := Sig3(v); got != want {
			t.Errorf("Sig3(%v) = %q, want %q", v, got, want)
		}
	}
}

func TestBandwidthUnit(t *testing.T) {
	for s, want := range map[string]BandwidthUnit{"GB/s": GBps, "GBps": GBps, "gbps": GBps, "Gbit/s": Gbitps, "gbit": Gbitps} {
		u, err := ParseBandwidthUnit(s)
		if err != nil || u != want {
			t.Errorf("ParseBandwidthUnit(%q) = %v, %v; want %v", s, u, err, want)
		}
	}
	if _, err := ParseBandwidthUnit("MB/s"); err == nil {
		t.Error("MB/s accepted")
	}
	if got := GBps.Format(12.16); got != "1.52 GB/s" {
		t.Errorf("GBps.Format(12.16) = %q", got)
	}
	if got := Gbitps.Format(12.16); got != "12.2 Gbit/s" {
		t.Errorf("Gbitps.Format(12.16) = %q", got)
	}
}
