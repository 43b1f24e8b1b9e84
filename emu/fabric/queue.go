package fabric

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"time"
)

// Queue is a link direction's egress queue discipline: what the
// transmitter sends next, and which frames it refuses. The link direction
// owns the frame buffers and its counters (queue_drops, max_queue); a
// discipline only orders, admits and drops. Today's is DropTail;
// congestion control adds its own (RED with ECN marking, priority queues
// with PFC pause: issue 36), each one file here plus its line in
// disciplines.
//
// A discipline is called on the fabric's event loop only and must not
// allocate in steady state (emu's allocation tests run through it).
type Queue interface {
	// Enqueue offers a packet. The discipline may read and rewrite its
	// bytes (an ECN mark) and keeps p.Frame until Dequeue returns it. It
	// reports false when it refuses the packet; the frame is then the
	// link's again.
	Enqueue(p Packet) bool
	// Dequeue removes and returns the packet to send at now (ok true).
	// When none may go at now it returns ok false and next, the earliest
	// time one may, or Never when time alone releases none (empty, or all
	// held back): the link direction then asks again at next, or when
	// something is enqueued.
	Dequeue(now time.Duration) (p Packet, next time.Duration, ok bool)
	// Len is the number of packets held.
	Len() int
}

// Packet is a frame in an egress queue.
type Packet struct {
	Frame []byte        // the frame, in a buffer of the link direction's
	Ready time.Duration // not to be sent before (the switch's latency)
	// Tag is the sender's, handed back when the frame leaves the queue
	// (see PushTagged): the switch's buffer accounting names the ingress
	// port and priority it charged the frame to.
	Tag uint32
}

// Never is the Dequeue time of a queue that time alone will not release.
const Never = time.Duration(math.MaxInt64)

// QueueConfig is what every discipline is made from.
type QueueConfig struct {
	Limit int // frames (the link's queue, topo.LinkParams.Queue)
	// MarkBytes, if positive, is the ECN marking threshold: a packet
	// enqueued behind at least this many bytes has its IPv4 ECN set to CE
	// if it is ECN-capable (ECT), as a switch's egress marks on queue
	// depth (ATP's p4ml.p4: deq_qdepth against a threshold; DCTCP's K).
	MarkBytes int
	// Scheduler, Weights, RED and Seed make a "prio" queue (prio.go):
	// the scheduler among its classes ("strict", the default, or
	// "dwrr"), DWRR's weight per priority (0: 1), the classes' RED/ECN
	// profile (zero: MarkBytes as a step, if set), and the seed of its
	// marking draws.
	Scheduler string
	Weights   [8]int
	RED       RED
	Seed      uint64
}

// DefaultQueue is the discipline of a fabric that names none.
const DefaultQueue = "droptail"

// disciplines are the queue disciplines by name: a new one is its file
// plus one line here.
var disciplines = map[string]func(QueueConfig) Queue{
	"droptail": newDropTail,
	"prio":     newPrio,
}

// NewQueue makes the discipline called name ("" is DefaultQueue).
func NewQueue(name string, cfg QueueConfig) (Queue, error) {
	if name == "" {
		name = DefaultQueue
	}
	mk, ok := disciplines[name]
	if !ok {
		return nil, fmt.Errorf("queue discipline %q: want one of %s", name, strings.Join(QueueDisciplines(), ", "))
	}
	return mk(cfg), nil
}

// QueueDisciplines are the disciplines' names, sorted.
func QueueDisciplines() []string {
	names := make([]string, 0, len(disciplines))
	for n := range disciplines {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}
