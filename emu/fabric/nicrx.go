package fabric

import (
	"fmt"
	"math"

	"github.com/inaemu/inaemu/emu/nic"
	"github.com/inaemu/inaemu/emu/switching"
)

// setNICRxBuffers gives every NIC the receive buffer cfg asks for
// (nic.SetRxBuffer): drained at NICRxRate, of NICRxBuffer bytes. With
// MAC Control on and lossless priorities (PFC), the NIC pauses them on
// its own link direction (a switching.PauseEgress, as a switch port's)
// when its buffer crosses XOFF; its headroom is the one the switch's
// buffer reserves for a port on the same link (BufferConfig.PortHeadroom,
// 802.1Qbb Annex N), since the frames in flight while the pause takes
// effect are the same. Without PFC the NIC drops what does not fit.
func (f *Fabric) setNICRxBuffers(cfg *Config) error {
	switch {
	case cfg.NICRxRate < 0 || math.IsNaN(cfg.NICRxRate) || math.IsInf(cfg.NICRxRate, 0):
		return fmt.Errorf("NIC receive rate %v b/s: want a rate greater than 0, or 0 for none", cfg.NICRxRate)
	case cfg.NICRxBuffer != 0 && cfg.NICRxRate == 0:
		return fmt.Errorf("a NIC receive buffer of %d B needs a drain rate", cfg.NICRxBuffer)
	case cfg.NICRxRate == 0:
		return nil
	}
	for _, h := range f.NICs {
		d := f.uplink(h)
		if d == nil {
			continue
		}
		rate := 8e12 / float64(d.bytePs)
		rb := nic.RxBuffer{Rate: cfg.NICRxRate, Bytes: cfg.NICRxBuffer, LinkRate: rate}
		if d.pfc != nil && cfg.Buffer.Lossless != 0 {
			rb.Pause, rb.Lossless = d, cfg.Buffer.Lossless
			rb.Headroom = cfg.Buffer.PortHeadroom(switching.PortLink{Rate: rate, Prop: d.prop})
		}
		if err := h.SetRxBuffer(rb); err != nil {
			return fmt.Errorf("%s: %v", h.Name, err)
		}
	}
	return nil
}
