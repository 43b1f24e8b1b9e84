package fabric

import (
	"io"
	"math"
	"time"

	"github.com/inaemu/inaemu/emu/topo"
	"github.com/inaemu/inaemu/faults"
	"github.com/inaemu/inaemu/internal/pcapio"
)

// capture writes what every link direction delivers to a pcapng file: one
// interface per switch port and direction ("port3-in" is rank 3's host to
// the switch, "port3-out" the switch to that host), virtual timestamps,
// the frames as the receiver got them (corrupted ones included), in the
// order they arrived. Whatever a fault stage did is a packet comment
// starting "inaemu:"; frames a fault dropped are written too, at the time
// they would have arrived, with a comment ending "(not delivered)", so
// Wireshark shows the whole story.
type capture struct {
	w   *pcapio.Writer
	err error
}

// newCapture starts the capture with the section comment comment (the
// switch program and element type when not the defaults; see
// pcapio.SwitchProgramComment, pcapio.DTypeComment). A fabric with
// congestion settings (its directions have MAC Control) states each
// interface's link too, so that a reader judges its PAUSE/PFC frames from
// the capture alone: the rate the topology gives the link (if_speed; the
// direction's bytePs is its rounding) and the link's propagation delay
// (pcapio.LinkDelayDescription). Without them nothing is added: those
// captures stay the bytes they always were.
func newCapture(out io.Writer, comment string, dirs []*linkDir) (*capture, error) {
	ifaces := make([]pcapio.Interface, len(dirs))
	for i, d := range dirs {
		ifaces[i].Name = d.name
		if d.pfc != nil {
			if l := d.link(); l != nil {
				ifaces[i].Speed = uint64(math.Round(l.Rate))
			}
			ifaces[i].Delay, ifaces[i].HasDelay = d.prop, true
		}
	}
	w, err := pcapio.NewInterfaceWriter(out, comment, ifaces...)
	if err != nil {
		return nil, err
	}
	for i, d := range dirs {
		d.capID = i
	}
	return &capture{w: w}, nil
}

// link is the topology link the direction is one of (nil for none).
func (d *linkDir) link() *topo.Link {
	if d.fab == nil || d.fab.Topo == nil {
		return nil
	}
	if i, _, ok := d.fab.Topo.Direction(d.name); ok {
		return &d.fab.Topo.Links[i]
	}
	return nil
}

func (c *capture) record(d *linkDir, at time.Duration, frame []byte, note faults.Note, ev *faults.Event, extra time.Duration, dropped bool) {
	if c.err != nil || d.capID < 0 {
		return
	}
	if note == 0 && !dropped {
		c.err = c.w.WriteIndex(d.capID, int64(at), frame)
		return
	}
	c.err = c.w.WriteIndex(d.capID, int64(at), frame, pcapio.FaultComment(note.String(), ev.SpecText(), extra, dropped))
}

func (c *capture) close() error {
	if c.err != nil {
		return c.err
	}
	return c.w.Flush()
}
