package fabric

import (
	"errors"
	"fmt"
	"time"

	"github.com/inaemu/inaemu/emu/nic"
	"github.com/inaemu/inaemu/roce"
)

// QueueSampler records one link direction's egress queue, in bytes, at a
// fixed interval of virtual time: what an experiment plots or averages
// (a congestion-control run's standing queue). It only reads the queue:
// its timer fires between other events and never moves a frame, so a run
// sampled is the run unsampled, frame for frame. Without a sampler
// nothing of this exists (no timer, no work per frame).
//
// The bytes are the frames' as a capture shows them (no preamble, FCS or
// gap) waiting in the egress queue, every class together, not counting
// the frame on the line: the depth RED/ECN marks on (prio.go) and a
// switch's queue-depth counters report.
type QueueSampler struct {
	// Dir is the sampled direction's name ("port3-out").
	Dir string
	// Start is the first sample's time and Every the interval: Bytes[k]
	// is the queue at Start + k·Every.
	Start, Every time.Duration
	Bytes        []int

	d     *linkDir
	timer roce.Timer
}

// SampleQueue samples the egress queue of the link direction called dir
// every interval, from now until Stop.
func (f *Fabric) SampleQueue(dir string, every time.Duration) (*QueueSampler, error) {
	if every <= 0 {
		return nil, fmt.Errorf("fabric: queue sampling interval %v: want a positive time", every)
	}
	if f.Live() {
		return nil, errors.New("fabric: a live fabric's queues are the devices'")
	}
	for _, d := range f.dirs {
		if d.name == dir {
			s := &QueueSampler{Dir: dir, Start: f.Clock.Now(), Every: every, d: d}
			s.timer = f.Clock.AfterFunc(0, s.sample)
			return s, nil
		}
	}
	return nil, fmt.Errorf("fabric: no link direction %q", dir)
}

// DirInto is the name of the link direction that delivers to NIC h (on a
// star, the switch's egress toward h, where an incast to h queues).
func (f *Fabric) DirInto(h *nic.NIC) (string, bool) {
	if up := f.uplink(h); up != nil && up.rev != nil {
		return up.rev.name, true
	}
	return "", false
}

func (s *QueueSampler) sample() {
	s.Bytes = append(s.Bytes, queueBytes(s.d.queue))
	s.timer.Reset(s.Every)
}

// Stop ends the sampling.
func (s *QueueSampler) Stop() { s.timer.Stop() }

// Window is the samples taken in [from, to) of virtual time.
func (s *QueueSampler) Window(from, to time.Duration) []int {
	lo := max(int((from-s.Start+s.Every-1)/s.Every), 0)
	hi := min(int((to-s.Start+s.Every-1)/s.Every), len(s.Bytes))
	if lo >= hi {
		return nil
	}
	return s.Bytes[lo:hi]
}

// queueBytes is the bytes q holds (the disciplines that know them).
func queueBytes(q Queue) int {
	switch x := q.(type) {
	case *DropTail:
		return x.bytes
	case *Prio:
		n := 0
		for c := range x.class {
			n += x.class[c].bytes
		}
		return n
	}
	return 0
}
