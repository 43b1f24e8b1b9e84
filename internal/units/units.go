// Package units reads and writes the quantities inaemu's flags and files use: link rates the tc way, byte sizes.
package units

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// ParseRate reads a link rate in bits per second the way tc does: "10G"
// or "10Gbit" (bits), "400M", "1000k", a bare number of bit/s; tc's
// "bps" suffixes are bytes per second ("1gbps" = 8 Gbit/s).
func ParseRate(s string) (float64, error) {
	t := strings.ToLower(strings.TrimSpace(s))
	unit := 1.0
	switch {
	case strings.HasSuffix(t, "bit/s"):
		t = strings.TrimSuffix(t, "bit/s")
	case strings.HasSuffix(t, "bit"):
		t = strings.TrimSuffix(t, "bit")
	case strings.HasSuffix(t, "bps"):
		t, unit = strings.TrimSuffix(t, "bps"), 8
	}
	mult := 1.0
	if n := len(t); n > 0 {
		switch t[n-1] {
		case 'k':
			mult, t = 1e3, t[:n-1]
		case 'm':
			mult, t = 1e6, t[:n-1]
		case 'g':
			mult, t = 1e9, t[:n-1]
		case 't':
			mult, t = 1e12, t[:n-1]
		}
	}
	v, err := strconv.ParseFloat(t, 64)
	r := v * mult * unit
	if err != nil || math.IsNaN(r) || r < 1e6 || r > 1e13 {
		return 0, fmt.Errorf("rate %q: want e.g. 10G, 25Gbit, 100G (1 Mbit/s to 10 Tbit/s)", s)
	}
	return r, nil
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
