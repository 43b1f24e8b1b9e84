package scenario

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/inaemu/inaemu/emu"
	"github.com/inaemu/inaemu/emu/fabric"
	"github.com/inaemu/inaemu/emu/nic"
	"github.com/inaemu/inaemu/faults"
	"github.com/inaemu/inaemu/internal/units"
)

// applyCongestion sets the network's buffer, PFC and scheduler settings.
func (s *Scenario) applyCongestion(cfg *emu.Config, set func(string, func() error)) {
	if s.SwitchBuffer != "" {
		set("switch_buffer", func() (e error) { cfg.Buffer.Bytes, e = positiveSize(s.SwitchBuffer); return })
	}
	if s.PFC != "" {
		set("pfc", func() error {
			_, _, e := emu.ParsePFC(s.PFC)
			if cfg.PFC = s.PFC; s.PFC == "off" {
				cfg.PFC = "" // the default, which Config spells ""
			}
			return e
		})
	}
	if s.PFCXoff != "" {
		set("pfc_xoff", func() (e error) {
			if s.PFCXoff == "dynamic" {
				cfg.Buffer.XOFF = 0
				return nil
			}
			cfg.Buffer.XOFF, e = positiveSize(s.PFCXoff)
			return
		})
	}
	if s.PFCAlpha != "" {
		set("pfc_alpha", func() (e error) { cfg.Buffer.Alpha, e = parseAlpha(s.PFCAlpha); return })
	}
	if s.PFCHeadroom != "" {
		set("pfc_headroom", func() (e error) { cfg.Buffer.Headroom, e = positiveSize(s.PFCHeadroom); return })
	}
	if s.RED != "" {
		set("red", func() (e error) { cfg.RED, e = ParseRED(s.RED); return })
	}
	if s.Sched != "" {
		set("sched", func() (e error) { cfg.Scheduler, cfg.DWRRWeights, e = ParseSched(s.Sched); return })
	}
	if s.NICRxRate != "" {
		set("nic_rx_rate", func() (e error) {
			if cfg.NICRxRate, e = units.ParseRate(s.NICRxRate); e == nil && !(cfg.NICRxRate > 0) {
				e = fmt.Errorf("%q: want a rate greater than 0", s.NICRxRate)
			}
			return
		})
	}
	if s.NICRxBuffer != "" {
		set("nic_rx_buffer", func() (e error) {
			if cfg.NICRxBuffer, e = positiveSize(s.NICRxBuffer); e == nil && cfg.NICRxBuffer < 2*nic.MaxFrame {
				e = fmt.Errorf("%q: want at least two maximum frames (%d B)", s.NICRxBuffer, 2*nic.MaxFrame)
			}
			return
		})
	}
}

// positiveSize is a size in bytes greater than zero.
func positiveSize(v string) (int64, error) {
	n, err := units.ParseSize(v)
	if err == nil && n <= 0 {
		err = fmt.Errorf("%q: want a size greater than 0", v)
	}
	return n, err
}

// parseAlpha reads a dynamic threshold factor: a number (0.5), a
// fraction (1/8) or a power of two as SONiC's dynamic_th writes it is not
// taken (it would read as the number itself).
func parseAlpha(v string) (float64, error) {
	num, den, frac := strings.Cut(v, "/")
	a, err := strconv.ParseFloat(num, 64)
	if err == nil && frac {
		var d float64
		if d, err = strconv.ParseFloat(den, 64); err == nil {
			if d <= 0 {
				return 0, fmt.Errorf("%q: want a factor greater than 0, e.g. 1, 0.5 or 1/8", v)
			}
			a /= d
		}
	}
	if err != nil || !(a > 0) || a > 1e6 {
		return 0, fmt.Errorf("%q: want a factor greater than 0, e.g. 1, 0.5 or 1/8", v)
	}
	return a, nil
}

// ParseSched reads an egress scheduler: strict, dwrr (every priority's
// weight 1) or dwrr:W0,W1,...,W7 (eight weights, 1..100). Config's "" is
// no priority queues at all (strict when PFC or RED makes them).
func ParseSched(v string) (string, [8]int, error) {
	var w [8]int
	name, list, hasList := strings.Cut(v, ":")
	switch {
	case name == "strict" && !hasList:
		return name, w, nil

	case name == "dwrr" && !hasList:
		return name, w, nil
	case name == "dwrr":
		f := strings.Split(list, ",")
		if len(f) != 8 {
			return "", w, fmt.Errorf("%q: dwrr takes eight weights, one per priority 0..7 (dwrr:1,1,1,4,1,1,1,1)", v)
		}
		for i, x := range f {
			n, err := strconv.Atoi(strings.TrimSpace(x))
			if err != nil || n < 1 || n > 100 {
				return "", w, fmt.Errorf("%q: weight %q: want 1..100", v, x)
			}
			w[i] = n
		}
		return name, w, nil
	}
	return "", w, fmt.Errorf("%q: want strict, dwrr or dwrr:W0,...,W7", v)
}

// ParseRED reads a RED/ECN marking profile: off, or KMIN,KMAX,PMAX (sizes
// and a netem percentage: 5KB,200KB,1% is DCQCN's switch setting).
func ParseRED(v string) (fabric.RED, error) {
	if v == "off" {
		return fabric.RED{}, nil
	}
	want := fmt.Errorf("%q: want off or KMIN,KMAX,PMAX, e.g. 5KB,200KB,1%%", v)
	f := strings.Split(v, ",")
	if len(f) != 3 {
		return fabric.RED{}, want
	}
	kmin, err1 := units.ParseSize(strings.TrimSpace(f[0]))
	kmax, err2 := units.ParseSize(strings.TrimSpace(f[1]))
	pmax, err3 := faults.ParsePercent(strings.TrimSpace(f[2]))
	if err1 != nil || err2 != nil || err3 != nil || kmax > 1<<30 {
		return fabric.RED{}, want
	}
	r := fabric.RED{Kmin: int(kmin), Kmax: int(kmax), Pmax: pmax}
	if kmin > kmax {
		return r, fmt.Errorf("%q: Kmin %d > Kmax %d: want KMIN <= KMAX", v, kmin, kmax)
	}
	if err := r.Validate(); err != nil {
		return r, fmt.Errorf("%q: %v", v, err)
	}
	return r, nil
}
