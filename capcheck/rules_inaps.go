package capcheck

import (
	"encoding/binary"
	"fmt"
	"math/bits"
	"strings"

	"github.com/inaemu/inaemu/frames"
	"github.com/inaemu/inaemu/frames/wire"
)

// The inaps family: in-network aggregation with a parameter server (ATP's
// 308-byte frame, EtherType 0x0700, with ESA's priority; frames/wire
// INAPS). Every result a switch or parameter server sends must be the sum
// of the workers' gradients, and every partial it diverts to the
// parameter server the sum of the gradients its bitmap names. The values
// are int32 (ATP converts gradients to fixed point before sending them)
// and a switch adds them with the ALU's wrapping int32 addition, so the
// sum is the wrapping one, in any order. Sources: ATP (NSDI '21) and its
// code (github.com/in-ATP/ATP, common/packet.h struct agghdr); ESA, "
// Efficient Data-Plane Memory Scheduling for In-Network Aggregation"
// (the priority byte, the reminder). See docs/check.md.
//
// Which frame is which, by its flag byte (wire.INAPSFlag*):
//   - a gradient (a worker's contribution): no ACK, no Collision, not a
//     reminder, one bit in the bitmap (the worker's), seen on a host →
//     switch direction (X-in, or the host's side of its link); also the
//     header of a reliable-channel gradient retransmission (UDP port
//     4792, channel kind 1), wherever seen;
//   - a result: ACK (not a reminder), or a channel query answer with the
//     result (kind 5) or parameter (kind 7);
//   - a partial: Collision without ACK (a diverted raw gradient, or an
//     evicted partial sum), or a reminder return (flags exactly 0x06)
//     with a non-zero bitmap (what the switch held).
//
// A fragment is (job, key, seq); seq is extended past 16 bits per (job,
// key) as frames arrive, so a long tensor's sequence numbers may wrap.
// The workers of a job are 0..fan-in-1 (the gradients' fan-in field).

// The inaps family's rules.
const (
	// RuleINAPSSum names a result that is not the sum of its fragment's
	// contributions (or whose bitmap is not the job's full mask), and a
	// worker whose copies of one gradient differ.
	RuleINAPSSum = "inaps-sum"
	// RuleINAPSPartial names a partial that is not the sum of the
	// contributions its bitmap names.
	RuleINAPSPartial = "inaps-partial"
)

// The reliable worker <-> parameter server channel: UDP to port 4792, a
// 10-byte header {kind, reserved, seq u32, ack u32}, then for kinds 1..7
// an INA-PS header.
const (
	inapsChannelPort   = 4792
	inapsChannelHdrLen = 10
	inapsChanGradient  = 1 // a worker's gradient retransmission
	inapsChanAnswer    = 5 // a query answer carrying the result
	inapsChanParameter = 7 // a result sent to one worker
	inapsChanLastHdr   = 7 // kinds 1..7 carry an INA-PS header
	inapsKindFrame     = -1
)

// inapsFrame finds the INA-PS header in an Ethernet frame: that of an
// INA-PS frame (kind inapsKindFrame) or of a channel datagram (its kind).
// ok says the frame is INA-PS traffic at all; h is nil when it carries no
// header (a channel ACK) or is cut too short to hold one.
func inapsFrame(b []byte) (h wire.INAPS, kind int, ok bool) {
	off := afterTags(b)
	if off+2 > len(b) {
		return nil, 0, false
	}
	et, ip := binary.BigEndian.Uint16(b[off:]), b[off+2:]
	if et != wire.EtherTypeINAPS && et != frames.EtherTypeIPv4 {
		return nil, 0, false
	}
	ihl := 0
	if len(ip) >= 20 && ip[0]>>4 == 4 {
		ihl = int(ip[0]&0x0F) * 4
	}
	if et == wire.EtherTypeINAPS {
		if ihl < 20 || len(ip) < ihl+wire.INAPSLen {
			return nil, inapsKindFrame, true
		}
		return wire.INAPS(ip[ihl : ihl+wire.INAPSLen]), inapsKindFrame, true
	}
	if ihl < 20 || len(ip) < ihl+8 || ip[9] != 17 || binary.BigEndian.Uint16(ip[6:])&0x1FFF != 0 {
		return nil, 0, false
	}
	udp := ip[ihl:]
	if binary.BigEndian.Uint16(udp[2:]) != inapsChannelPort {
		return nil, 0, false
	}
	pay := udp[8:]
	if len(pay) < inapsChannelHdrLen {
		return nil, 0, true
	}
	kind = int(pay[0])
	if kind < 1 || kind > inapsChanLastHdr || len(pay) < inapsChannelHdrLen+wire.INAPSLen {
		return nil, kind, true
	}
	return wire.INAPS(pay[inapsChannelHdrLen : inapsChannelHdrLen+wire.INAPSLen]), kind, true
}

// readable: a frame of this kind should carry a header (a plain INA-PS
// frame, channel kinds 1..7).
func inapsWantsHeader(kind int) bool {
	return kind == inapsKindFrame || (kind >= 1 && kind <= inapsChanLastHdr)
}

// The role of an INA-PS header in the rules.
const (
	inapsNone     uint8 = iota // judged by no rule (a request, a reminder, an empty return)
	inapsGradient              // a worker's contribution
	inapsResult
	inapsPartial
	inapsRaw // overflow: raw floats, not int32 sums; not judged
)

func inapsRole(h wire.INAPS, kind int) uint8 {
	role := inapsRoleOf(h, kind)
	if role != inapsNone && h.Flags()&wire.INAPSFlagOverflow != 0 {
		return inapsRaw
	}
	return role
}

func inapsRoleOf(h wire.INAPS, kind int) uint8 {
	switch kind {
	case inapsKindFrame:
	case inapsChanGradient:
		if bits.OnesCount32(h.Bitmap()) == 1 {
			return inapsGradient
		}
		return inapsNone
	case inapsChanAnswer, inapsChanParameter:
		return inapsResult
	default:
		return inapsNone
	}
	fl := h.Flags()
	switch {
	case fl == wire.INAPSFlagsReminder:
		if h.Bitmap() != 0 {
			return inapsPartial
		}
	case fl&wire.INAPSFlagACK != 0:
		return inapsResult
	case fl&wire.INAPSFlagCollision != 0:
		if h.Bitmap() != 0 {
			return inapsPartial
		}
	case bits.OnesCount32(h.Bitmap()) == 1:
		return inapsGradient
	}
	return inapsNone
}

// noteINAPS marks frame i, whose bytes are INA-PS traffic, for the second
// pass: other traffic to the stream rules (never an unreadable RoCE
// frame), and one a corrupt fault hit remembered.
func (p *frameParser) noteINAPS(i int, f *checkFrame, corrupt bool) {
	f.class, f.inaps = fcOther, true
	if f.ghost {
		return
	}
	p.rep.INAPSFrames++
	if corrupt {
		if p.inapsCorrupt == nil {
			p.inapsCorrupt = map[int]bool{}
		}
		p.inapsCorrupt[i] = true
	}
}

type inapsStreamKey struct {
	job uint16
	key uint64
}

// inapsStream is a (job, key)'s sequence: the newest seq seen, extended
// past 16 bits, and the newest of its fragments forgotten.
type inapsStream struct {
	newest, horizon int64
}

type inapsFragKey struct {
	job uint16
	key uint64
	seq int64 // extended
}

// inapsContrib is a worker's contribution: its first copy.
type inapsContrib struct {
	worker uint8
	frame  int32
	vals   [wire.INAPSValues]int32
}

// inapsPending is a result or partial seen before the contributions it
// needs: judged when they are in, else counted as not checked.
type inapsPending struct {
	frame  int32
	role   uint8
	bitmap uint32
	vals   [wire.INAPSValues]int32
}

// inapsFrag is what the rules hold of one fragment.
type inapsFrag struct {
	have    uint32 // workers whose contribution is in cs
	cs      []inapsContrib
	pending []inapsPending
	sum     [wire.INAPSValues]int32 // of the full mask, when summed
	summed  bool
	// tainted: a fault corrupted one of its frames, or a worker's copies
	// differ (reported): its results and partials are not judged.
	tainted bool
	touched int // inapsChecker.n when a frame of it was last seen
}

// How much the rules keep: a fragment is forgotten once it is
// inapsKeep fragments behind its (job, key)'s newest, or no frame of it
// was seen for inapsIdle INA-PS frames (a tensor finished long ago, a
// fragment whose contributions the capture does not all show); a frame of
// a forgotten fragment is counted as not checked. A worker's window of
// fragments in flight is far smaller than either (ATP and SwitchML keep a
// few hundred aggregators per job).
const (
	inapsKeep  = 8192
	inapsIdle  = 1 << 18
	inapsSweep = 1 << 12
)

type inapsChecker struct {
	fs      *frameStore
	rep     *Report
	report  func(rule string, f *checkFrame, detail string)
	corrupt map[int]bool
	fanIn   map[uint16]uint8
	streams map[inapsStreamKey]*inapsStream
	frags   map[inapsFragKey]*inapsFrag
	spare   []*inapsFrag
	n       int
	scratch inapsPending
	sum     [wire.INAPSValues]int32
}

// checkINAPS applies inaps-sum and inaps-partial, reading the frames the
// first pass marked again, in capture order (payloads).
func checkINAPS(payloads func(yield func(i int, data []byte) bool) error, fs *frameStore, sides *hostSides, corrupt map[int]bool, rep *Report, report func(rule string, f *checkFrame, detail string)) error {
	a := &inapsChecker{fs: fs, rep: rep, report: report, corrupt: corrupt, fanIn: map[uint16]uint8{},
		streams: map[inapsStreamKey]*inapsStream{}, frags: map[inapsFragKey]*inapsFrag{}}
	err := payloads(func(i int, data []byte) bool {
		if i >= fs.len() {
			return true
		}
		if f := fs.at(i); f.inaps && !f.ghost {
			a.frame(i, f, data, sides.of(i))
		}
		return true
	})
	for _, fr := range a.frags {
		rep.INAPSUnchecked += len(fr.pending)
	}
	return err
}

func (a *inapsChecker) frame(i int, f *checkFrame, data []byte, side uint8) {
	rep := a.rep
	h, kind, _ := inapsFrame(data)
	if h == nil || f.snapped {
		if f.snapped || inapsWantsHeader(kind) {
			rep.INAPSUnchecked++ // cut short: its role unknown
		}
		return
	}
	role := inapsRole(h, kind)
	switch {
	case role == inapsNone:
		return
	case role == inapsRaw:
		rep.INAPSUnchecked++
		return
	case role == inapsGradient && kind == inapsKindFrame && side != sideIn:
		return // a gradient only counts where it leaves its worker
	}
	if a.n++; a.n%inapsSweep == 0 {
		a.evict()
	}
	job := h.Job()
	if role == inapsGradient && a.fanIn[job] == 0 && h.FanIn() > 0 && h.FanIn() <= 32 {
		a.fanIn[job] = h.FanIn()
	}
	sk := inapsStreamKey{job, h.Key()}
	st := a.streams[sk]
	if st == nil {
		st = &inapsStream{newest: int64(h.Seq()), horizon: -1 << 62}
		a.streams[sk] = st
	}
	seq := st.newest + int64(int16(h.Seq()-uint16(st.newest)))
	st.newest = max(st.newest, seq)
	k := inapsFragKey{job, sk.key, seq}
	fr := a.frags[k]
	if fr == nil {
		if seq <= st.horizon {
			rep.INAPSUnchecked++ // its fragment was forgotten (or never seen until now)
			return
		}
		fr = a.frag()
		a.frags[k] = fr
	}
	fr.touched = a.n
	if a.corrupt[i] {
		fr.tainted = true
		if role != inapsGradient {
			rep.INAPSUnchecked++
		}
		return
	}
	if role == inapsGradient {
		a.contribution(fr, k, i, h)
		return
	}
	p := &a.scratch
	p.frame, p.role, p.bitmap = int32(i), role, h.Bitmap()
	for j := range p.vals {
		p.vals[j] = h.Value(j)
	}
	if !a.judge(fr, k, p) {
		fr.pending = append(fr.pending, *p)
	}
}

// contribution keeps worker w's first copy of a gradient, and reports a
// later copy that differs from it.
func (a *inapsChecker) contribution(fr *inapsFrag, k inapsFragKey, i int, h wire.INAPS) {
	w := uint8(bits.TrailingZeros32(h.Bitmap()))
	if n := a.fanIn[k.job]; n > 0 && w >= n {
		return // no worker of the job
	}
	if fr.have&(1<<w) != 0 {
		c := fr.contrib(w)
		for j := range c.vals {
			if v := h.Value(j); v != c.vals[j] && !fr.tainted {
				fr.tainted = true
				a.report(RuleINAPSSum, a.fs.at(i), fmt.Sprintf("worker %d's two copies of seq %d (job %d, key %d) differ: value %d is %d here, %d in frame %d",
					w, h.Seq(), k.job, k.key, j, v, c.vals[j], c.frame+1))
				break
			}
		}
		return
	}
	fr.cs = append(fr.cs, inapsContrib{worker: w, frame: int32(i)})
	c := &fr.cs[len(fr.cs)-1]
	for j := range c.vals {
		c.vals[j] = h.Value(j)
	}
	fr.have |= 1 << w
	fr.summed = false
	// What waited for it may be judged now.
	kept := fr.pending[:0]
	for pi := range fr.pending {
		if !a.judge(fr, k, &fr.pending[pi]) {
			kept = append(kept, fr.pending[pi])
		}
	}
	fr.pending = kept
}

func (fr *inapsFrag) contrib(w uint8) *inapsContrib {
	for i := range fr.cs {
		if fr.cs[i].worker == w {
			return &fr.cs[i]
		}
	}
	return nil
}

// judge applies its rule to a result or partial, if the contributions it
// needs are in (false: not yet).
func (a *inapsChecker) judge(fr *inapsFrag, k inapsFragKey, p *inapsPending) bool {
	rep := a.rep
	n := a.fanIn[k.job]
	if n == 0 {
		return false // no gradient of the job seen yet: its workers unknown
	}
	full := uint32(1<<n - 1)
	f := a.fs.at(int(p.frame))
	seq := uint16(k.seq)
	if fr.tainted {
		rep.INAPSUnchecked++
		return true
	}
	if p.role == inapsResult {
		if p.bitmap != full {
			rep.INAPSResults++
			a.report(RuleINAPSSum, f, fmt.Sprintf("result of seq %d (job %d, key %d) has bitmap %#x, want the full mask %#x of the job's %d workers",
				seq, k.job, k.key, p.bitmap, full, n))
			return true
		}
		if fr.have&full != full {
			return false
		}
		if !fr.summed {
			a.subsetSum(fr, full)
			fr.sum, fr.summed = a.sum, true
		}
		rep.INAPSResults++
		if j := firstDiff(&p.vals, &fr.sum); j >= 0 {
			a.report(RuleINAPSSum, f, fmt.Sprintf("result of seq %d (job %d, key %d) is not the wrapping int32 sum of the %d workers' contributions (%s): value %d is %d, want %d",
				seq, k.job, k.key, n, fr.frames(full), j, p.vals[j], fr.sum[j]))
		}
		return true
	}
	if p.bitmap&^full != 0 {
		rep.INAPSPartials++
		a.report(RuleINAPSPartial, f, fmt.Sprintf("partial of seq %d (job %d, key %d) has bitmap %#x, naming workers beyond the job's %d",
			seq, k.job, k.key, p.bitmap, n))
		return true
	}
	if fr.have&p.bitmap != p.bitmap {
		return false
	}
	a.subsetSum(fr, p.bitmap)
	rep.INAPSPartials++
	if j := firstDiff(&p.vals, &a.sum); j >= 0 {
		a.report(RuleINAPSPartial, f, fmt.Sprintf("partial of seq %d (job %d, key %d) is not the wrapping int32 sum of the contributions its bitmap %#x names (%s): value %d is %d, want %d",
			seq, k.job, k.key, p.bitmap, fr.frames(p.bitmap), j, p.vals[j], a.sum[j]))
	}
	return true
}

// subsetSum sets a.sum to the wrapping sum of the contributions of the
// workers in mask (all held).
func (a *inapsChecker) subsetSum(fr *inapsFrag, mask uint32) {
	a.sum = [wire.INAPSValues]int32{}
	for ci := range fr.cs {
		if c := &fr.cs[ci]; mask&(1<<c.worker) != 0 {
			for j := range a.sum {
				a.sum[j] += c.vals[j]
			}
		}
	}
}

func firstDiff(got, want *[wire.INAPSValues]int32) int {
	if *got == *want {
		return -1
	}
	for j := range got {
		if got[j] != want[j] {
			return j
		}
	}
	return -1
}

// frames names the contributions of the workers in mask: "worker 0 frame
// 3, worker 1 frame 4".
func (fr *inapsFrag) frames(mask uint32) string {
	var parts []string
	for w := 0; w < 32; w++ {
		if mask&(1<<w) != 0 {
			if c := fr.contrib(uint8(w)); c != nil {
				parts = append(parts, fmt.Sprintf("worker %d frame %d", w, c.frame+1))
			}
		}
	}
	return strings.Join(parts, ", ")
}

// frag returns an empty fragment, a forgotten one when there is one (with
// its slices' room, so that a long capture stops allocating).
func (a *inapsChecker) frag() *inapsFrag {
	k := len(a.spare)
	if k == 0 {
		return &inapsFrag{}
	}
	fr := a.spare[k-1]
	a.spare = a.spare[:k-1]
	*fr = inapsFrag{cs: fr.cs[:0], pending: fr.pending[:0]}
	return fr
}

// evict forgets the fragments far behind their (job, key)'s newest or
// idle long; what still waited in them is counted as not checked.
func (a *inapsChecker) evict() {
	for k, fr := range a.frags {
		st := a.streams[inapsStreamKey{k.job, k.key}]
		if k.seq >= st.newest-inapsKeep && a.n-fr.touched <= inapsIdle {
			continue
		}
		a.rep.INAPSUnchecked += len(fr.pending)
		st.horizon = max(st.horizon, k.seq)
		delete(a.frags, k)
		a.spare = append(a.spare, fr)
	}
}

// inapsUnchecked is the report's unchecked line for the inaps family, if
// any.
func inapsUnchecked(r *Report) string {
	if r.INAPSUnchecked == 0 {
		return ""
	}
	return fmt.Sprintf("%s NOT CHECKED by inaps-sum and inaps-partial: results and partials whose contributions the capture does not all show (lost before the capture point), or that a fault corrupted, raw-float (overflow) frames, frames cut short",
		plural(r.INAPSUnchecked, "INA-PS frame"))
}

func inapsSummary(r *Report) string {
	if r.INAPSFrames == 0 {
		return ""
	}
	return fmt.Sprintf("%s: %d results and %d partials judged against their contributions' wrapping int32 sum, %d not checked",
		plural(r.INAPSFrames, "INA-PS frame"), r.INAPSResults, r.INAPSPartials, r.INAPSUnchecked)
}
