// Package units reads and writes the quantities inaemu's flags and files use: link rates and durations the tc way, byte sizes.
package units

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Rates are read as tc reads them. iproute2's get_rate64 (lib/utils_math.c,
// used by tc for every rate, netem's rate included) reads a floating-point
// number with strtod and an optional unit from this table, compared
// case-insensitively (strcasecmp):
//
//	bit or a bare number   bits per second
//	kbit mbit gbit tbit    10^3, 10^6, 10^9, 10^12 bits per second
//	kibit mibit gibit tibit 2^10, 2^20, 2^30, 2^40 bits per second
//	bps                    BYTES per second (8 bits)
//	kbps mbps gbps tbps    10^3 ... 10^12 BYTES per second
//	kibps mibps gibps tibps 2^10 ... 2^40 BYTES per second
//
// so "10gbps" and "10GBps" are both 80 Gbit/s, and a negative number or any
// other unit is an error. tc(8)'s RATES section documents the same table.
//
//	https://git.kernel.org/pub/scm/network/iproute2/iproute2.git/tree/lib/utils_math.c
//	https://git.kernel.org/pub/scm/network/iproute2/iproute2.git/tree/man/man8/tc.8
//	(mirrored at https://github.com/iproute2/iproute2)
//
// inaemu reads every spelling tc accepts as tc does. tc refuses a bare SI
// prefix ("10G"), which is how people name Ethernet speeds; inaemu reads it
// as bits ("10G" = 10gbit), as it reads "10Gbit/s". RateNote explains the
// spellings that read differently than a user may expect.

// rateUnits are get_rate64's units (lib/utils_math.c) in bits per second,
// then inaemu's own: a bare SI prefix and bit/s, both bits.
var rateUnits = []struct {
	suffix string
	scale  float64
	tc     bool // tc's own spelling
}{
	{"bit", 1, true},
	{"kibit", 1 << 10, true}, {"kbit", 1e3, true}, {"mibit", 1 << 20, true}, {"mbit", 1e6, true},
	{"gibit", 1 << 30, true}, {"gbit", 1e9, true}, {"tibit", 1 << 40, true}, {"tbit", 1e12, true},
	{"bps", 8, true},
	{"kibps", 8 << 10, true}, {"kbps", 8e3, true}, {"mibps", 8 << 20, true}, {"mbps", 8e6, true},
	{"gibps", 8 << 30, true}, {"gbps", 8e9, true}, {"tibps", 8 << 40, true}, {"tbps", 8e12, true},
	{"bit/s", 1, false}, {"kbit/s", 1e3, false}, {"mbit/s", 1e6, false}, {"gbit/s", 1e9, false}, {"tbit/s", 1e12, false},
	{"k", 1e3, false}, {"m", 1e6, false}, {"g", 1e9, false}, {"t", 1e12, false},
}

// splitRate splits a rate into its number and unit (the table's entry, or
// a bare number: bits).
func splitRate(s string) (num string, scale float64, unit string) {
	t := strings.TrimSpace(s)
	// ASCII only, byte for byte: strings.ToLower would turn a byte that
	// is not UTF-8 into three, and low's indices must be t's.
	low := []byte(t)
	for i, c := range low {
		if c >= 'A' && c <= 'Z' {
			low[i] = c + 'a' - 'A'
		}
	}
	for i := len(low) - 1; i >= 0; i-- { // the unit is the letters (and /) at the end
		if c := low[i]; !(c >= 'a' && c <= 'z' || c == '/') {
			u := string(low[i+1:])
			for _, r := range rateUnits {
				if u == r.suffix {
					return t[:i+1], r.scale, t[i+1:]
				}
			}
			if u == "" {
				return t, 1, ""
			}
			return t, 0, t[i+1:]
		}
	}
	return t, 0, t
}

// ParseRate reads a link rate as tc does (see above) and returns it in
// bits per second: "10gbit", "100mbit", "1e10" (bits), "10gbps" (bytes:
// 80 Gbit/s), "10gibit"; or, where tc has no reading, "10G" and
// "10Gbit/s" (bits). From 1 Mbit/s to 10 Tbit/s.
func ParseRate(s string) (float64, error) {
	num, scale, _ := splitRate(s)
	v, err := strconv.ParseFloat(num, 64)
	r := v * scale
	if err != nil || scale == 0 || math.IsNaN(r) || r < 1e6 || r > 1e13 {
		return 0, fmt.Errorf("rate %q: want e.g. 10G, 25gbit, 100G (bits per second, as tc writes them; 1 Mbit/s to 10 Tbit/s)", s)
	}
	return r, nil
}

// RateNote is a one-line note for a rate whose reading may surprise: a
// bytes unit (tc's "bps" family: "10Gbps" is 80 Gbit/s) or a binary
// prefix ("10gibit" is 10.737 Gbit/s). "" for bits in SI units, and for
// what ParseRate refuses.
func RateNote(s string) string {
	r, err := ParseRate(s)
	if err != nil {
		return ""
	}
	num, _, unit := splitRate(s)
	low := strings.ToLower(unit)
	prefix := unit // the SI or IEC prefix: G, Gi, k
	for _, u := range []string{"bit/s", "bit", "bps"} {
		if strings.HasSuffix(low, u) {
			prefix = unit[:len(unit)-len(u)]
			break
		}
	}
	binary := strings.HasSuffix(strings.ToLower(prefix), "i")
	switch {
	case strings.HasSuffix(low, "bps"):
		alt := ""
		if !binary {
			alt = " or " + FormatRate(r/8)
		}
		return fmt.Sprintf("%s is %s: tc reads 'bps' as bytes per second; write %s%sbit%s for bits", strings.TrimSpace(s), formatBits(r), num, prefix, alt)
	case binary:
		return fmt.Sprintf("%s is %s: tc reads ki, mi, gi and ti as binary prefixes (2^10 ... 2^40); write %s%sbit for powers of ten", strings.TrimSpace(s), formatBits(r), num, prefix[:len(prefix)-1])
	}
	return ""
}

// formatBits writes bits per second for a note: 80 Gbit/s, 10.737 Gbit/s.
func formatBits(bps float64) string {
	for _, u := range []struct {
		suf string
		m   float64
	}{{"Tbit/s", 1e12}, {"Gbit/s", 1e9}, {"Mbit/s", 1e6}, {"kbit/s", 1e3}} {
		if bps >= u.m {
			return strconv.FormatFloat(math.Round(bps/u.m*1000)/1000, 'f', -1, 64) + " " + u.suf
		}
	}
	return strconv.FormatFloat(bps, 'f', -1, 64) + " bit/s"
}

// ParseSize reads a byte count up to 1 TiB: "64MiB", "4MB", "512KiB",
// "1GiB", "1TiB", "4096".
func ParseSize(s string) (int64, error) {
	t := strings.TrimSpace(s)
	units := []struct {
		suf string
		m   int64
	}{{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"TiB", 1 << 40}, {"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9}, {"TB", 1e12},
		{"K", 1 << 10}, {"M", 1 << 20}, {"G", 1 << 30}, {"T", 1 << 40}, {"B", 1}}
	m := int64(1)
	for _, u := range units {
		if strings.HasSuffix(t, u.suf) {
			m, t = u.m, strings.TrimSuffix(t, u.suf)
			break
		}
	}
	v, err := strconv.ParseFloat(t, 64)
	if err != nil || v <= 0 || v*float64(m) > 1<<40 || v*float64(m) != math.Trunc(v*float64(m)) {
		return 0, fmt.Errorf("size %q: want a whole number of bytes, e.g. 4MiB, 64MiB, 1000000", s)
	}
	return int64(v * float64(m)), nil
}

// FormatSize writes n bytes the short way (16MiB, 1000B).
func FormatSize(n int64) string {
	for _, u := range []struct {
		suf string
		m   int64
	}{{"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}} {
		if n >= u.m && n%u.m == 0 {
			return fmt.Sprintf("%d%s", n/u.m, u.suf)
		}
	}
	return fmt.Sprintf("%dB", n)
}

// FormatRate writes bits per second the tc way (10G, 2.5G, 400M).
func FormatRate(bps float64) string {
	for _, u := range []struct {
		suf string
		m   float64
	}{{"T", 1e12}, {"G", 1e9}, {"M", 1e6}, {"K", 1e3}} {
		if bps >= u.m {
			return strconv.FormatFloat(bps/u.m, 'f', -1, 64) + u.suf
		}
	}
	return strconv.FormatFloat(bps, 'f', -1, 64)
}

// FormatBytes writes a byte count for people: 270 GiB, 4.5 GiB, 512 MiB.
func FormatBytes(n int64) string {
	v := float64(n)
	for _, u := range []struct {
		suf string
		m   float64
	}{{"TiB", 1 << 40}, {"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}} {
		if v >= u.m {
			if x := v / u.m; x < 10 && x != math.Trunc(x) {
				return strconv.FormatFloat(x, 'f', 1, 64) + " " + u.suf
			}
			return fmt.Sprintf("%.0f %s", v/u.m, u.suf)
		}
	}
	return fmt.Sprintf("%d B", n)
}

// Sig3 writes v with three significant digits and never in exponent
// form, for bandwidths and ratios people read: 0.000123, 0.0868, 1.52,
// 12.3, 123, 1235 (a number of four or more digits keeps them all).
func Sig3(v float64) string {
	if v == 0 || math.IsNaN(v) || math.IsInf(v, 0) {
		return strconv.FormatFloat(v, 'f', -1, 64)
	}
	if math.Abs(v) >= 999.5 {
		return strconv.FormatFloat(v, 'f', 0, 64)
	}
	r, _ := strconv.ParseFloat(strconv.FormatFloat(v, 'g', 3, 64), 64) // rounded first: 9.996 is 10.0
	dec := 2 - int(math.Floor(math.Log10(math.Abs(r))))
	return strconv.FormatFloat(r, 'f', max(dec, 0), 64)
}

// BandwidthUnit is the unit reports print bandwidths in: GB/s (10^9
// bytes per second, as nccl-tests prints algbw and busbw) or Gbit/s (10^9
// bits per second, as link rates are written).
type BandwidthUnit int

const (
	GBps   BandwidthUnit = iota // GB/s, the default
	Gbitps                      // Gbit/s
)

// String is the unit as reports print it: "GB/s" or "Gbit/s".
func (u BandwidthUnit) String() string {
	if u == Gbitps {
		return "Gbit/s"
	}
	return "GB/s"
}

// FromGbps converts a bandwidth in Gbit/s to the unit.
func (u BandwidthUnit) FromGbps(gbps float64) float64 {
	if u == Gbitps {
		return gbps
	}
	return gbps / 8
}

// Format writes a bandwidth given in Gbit/s in the unit, three
// significant digits and the unit's name: "1.52 GB/s", "12.2 Gbit/s".
func (u BandwidthUnit) Format(gbps float64) string {
	return Sig3(u.FromGbps(gbps)) + " " + u.String()
}

// ParseBandwidthUnit reads a --units value the way rates are read (tc's
// bps is bytes): GB/s, GBps or gbps for bytes; Gbit/s or gbit for bits.
func ParseBandwidthUnit(s string) (BandwidthUnit, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "gb/s", "gbps", "gbytes":
		return GBps, nil
	case "gbit/s", "gbit", "gbits":
		return Gbitps, nil
	}
	return 0, fmt.Errorf("--units %q: want GB/s (or GBps: bytes, as tc reads bps) or Gbit/s (or gbit: bits)", s)
}
