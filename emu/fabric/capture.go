package fabric

import (
	"io"
	"time"

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

// newCapture starts the capture; its section comment names program
// (pcapio.SwitchProgramComment: nothing for NetReduce's).
func newCapture(out io.Writer, program string, dirs []*linkDir) (*capture, error) {
	names := make([]string, len(dirs))
	for i, d := range dirs {
		names[i] = d.name
	}
	w, err := pcapio.NewCommentedWriter(out, pcapio.SwitchProgramComment(program), names...)
	if err != nil {
		return nil, err
	}
	for i, d := range dirs {
		d.capID = i
	}
	return &capture{w: w}, nil
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
