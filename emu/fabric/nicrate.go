package fabric

import "github.com/inaemu/inaemu/emu/nic"

// NICRate is the rate of the link NIC h transmits on, in bits per second
// (0 for a NIC that is not this fabric's, or a live fabric's device).
func (f *Fabric) NICRate(h *nic.NIC) float64 {
	if d := f.uplink(h); d != nil {
		return 8e12 / float64(d.bytePs)
	}
	return 0
}
