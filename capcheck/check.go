package capcheck

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/maphash"
	"io"
	"net/netip"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/inaemu/inaemu/frames"
	"github.com/inaemu/inaemu/frames/inceptionn"
	"github.com/inaemu/inaemu/frames/wire"
	"github.com/inaemu/inaemu/internal/pcapio"
	"github.com/inaemu/inaemu/tensor"
)

// CheckOptions tune Check.
type CheckOptions struct {
	// Interfaces are the pcapng interface names by interface index (nil
	// for classic pcap: the whole file is one vantage point). CheckFile
	// fills them in.
	Interfaces []string
	// Pairs name the response stream of a request stream explicitly
	// (--pair); they override automatic pairing.
	Pairs []QPPair
	// DType is the element type of NetReduce payloads (default F32).
	// CheckFile takes it from the capture's section comment when that
	// names one (pcapio.DTypeComment: inaemu's f16 and i32 runs), unless
	// DTypeFixed.
	DType      tensor.DType
	DTypeFixed bool
	// Vantage says where single-interface vantage points (a pcap file, a
	// mirror port, tcpdump on a host) were taken, for every connection
	// they see: VantageAuto (the default) infers it per connection from
	// the evidence. Named link directions (X-in/X-out, A-B/B-A) say it
	// themselves and are not affected.
	Vantage Vantage
	// InFlight bounds how long a frame may be on the way between a vantage
	// point and the requester, both ways together (0: DefaultInFlight;
	// negative: no window, capture order is taken as the requester's).
	// psn-order lets a requester act on the responses seen within this
	// window before its packet as if they had not reached it yet.
	//
	// A capture taken on the wall clock between software hosts (faultwire's,
	// written by `inaemu run --dut` and `inaemu wire`; dumpcap on the TAP
	// backend's bridges) gets WallClockInFlight by default instead: see
	// Clock.
	InFlight time.Duration
	// Clock says how the capture's timestamps were taken. ClockAuto (the
	// default): CheckFile reads the capture's own marker (a Section Header
	// Block comment pcapio.WallClockComment, written by faultwire), and
	// interface names that only wall-clock captures carry (the TAP
	// backend's bridges of one topology, all of them: PREFIX-br0 to
	// PREFIX-br(k-1), one PREFIX; or every one faultwire's hR-wR, wR-hR,
	// wR-swR, swR-wR) say the wall clock too; anything else (a user's
	// ovs-br1 among them) is taken as a clock whose in-flight times are a
	// data centre's (the emulator's virtual clock, a capture next to a
	// NIC).
	Clock Clock
	// ReorderWindow is how far apart in time two frames may be for the
	// later one to have overtaken the earlier on the way (0: from the
	// capture's fault annotations, see Check; negative: none). Within
	// it a response behind an earlier one and a data packet ahead of a
	// missing one are counted as reordered, not violations.
	ReorderWindow time.Duration
	// LinkTaps says that every single interface is the link of one host
	// (a capture per host link); agg-sum then tells the two directions
	// apart by the host's MAC. Interfaces named like the TAP backend's
	// bridges (PREFIX-brN) are taken as link taps without it.
	LinkTaps bool
	// MTU is the path MTU in bytes (256, 512, 1024, 2048 or 4096) that
	// says how many PSNs a READ request occupies (its length divided by
	// it, rounded up); 0: inferred from the capture, the payload length
	// of its FIRST and MIDDLE packets (which carry exactly one MTU), when
	// they all agree. Without it, a READ no longer than the largest
	// payload in the capture (at least 256 bytes, the smallest MTU) takes
	// one PSN, since no packet carries more than one MTU; a longer one
	// cannot be counted and its stream's PSN rules stop there, which the
	// report lists as unchecked. A value IBTA does not allow (anything but
	// those five) is ignored, the MTU inferred instead, and
	// Report.PathMTUWhy says so.
	MTU int
	// INATag is the InetTag of the switch's INA headers (0: inaemu's,
	// wire.INATag); NetReduce papers leave its value open.
	INATag uint32
	// SwitchProgram is the switch program whose aggregation the capture
	// shows ("": the one its section comment names, pcapio.SwitchProgram,
	// else netreduce). It sets the header length agg-sum expects in
	// front of a WRITE FIRST's data (aggHeaderLen).
	SwitchProgram string
	// LinkRate is every link's rate in bits per second (0: unknown), for
	// the pfc family: a pause quantum is 512 bit times at it. LinkRates
	// gives it per interface or link name (X, A~B) instead.
	LinkRate  float64
	LinkRates map[string]float64
	// LinkDelay bounds a link's propagation delay and a MAC's response to a
	// pause together, for pfc-paused-send (0: the interface's
	// InterfaceDelays, else the in-flight tolerance).
	LinkDelay time.Duration
	// InterfaceRates and InterfaceDelays are what the capture states of
	// each interface's link, by interface index: its rate in bits per
	// second (pcapng if_speed; 0: unknown) and its one-way propagation
	// delay (the description pcapio.LinkDelayPrefix; negative: unknown).
	// CheckFile reads them from the file when both are nil; LinkRate,
	// LinkRates and LinkDelay override them. inaemu's captures of a run
	// with congestion settings state both.
	InterfaceRates  []float64
	InterfaceDelays []time.Duration
	// DeadlockAfter is how long every direction of a cycle between
	// switches must have been paused together at the end of the capture
	// for pfc-deadlock (0: DefaultDeadlockAfter; negative: never).
	DeadlockAfter time.Duration
	// CNP says when cnp-missing judges a receiver (CNPAuto: when it sent a
	// CNP in the capture); CNPInterval is the NP's least time between two
	// CNPs for one QP (0: DefaultCNPInterval) and CNPTolerance how much
	// closer cnp-rate lets two be captured (0: DefaultCNPTolerance;
	// negative: none).
	CNP          CNPMode
	CNPInterval  time.Duration
	CNPTolerance time.Duration
}

// Vantage is where a single-interface capture was taken.
type Vantage uint8

const (
	// VantageAuto infers the position per connection from the evidence.
	VantageAuto Vantage = iota
	// VantageSender: at the requester (it sees every packet the requester
	// transmits, in its order, and the responses as they reach it).
	VantageSender
	// VantageReceiver: at the responder (it sees what the responder
	// receives, in its order; loss may lie before it).
	VantageReceiver
	// VantageTap: anywhere on the path (loss may lie on either side).
	VantageTap
)

var vantageNames = [...]string{"auto", "sender", "receiver", "tap"}

func (v Vantage) String() string {
	if int(v) < len(vantageNames) {
		return vantageNames[v]
	}
	return fmt.Sprintf("vantage(%d)", v)
}

// ParseVantage reads auto, sender, receiver or tap.
func ParseVantage(s string) (Vantage, error) {
	for i, n := range vantageNames {
		if s == n {
			return Vantage(i), nil
		}
	}
	return 0, fmt.Errorf("vantage %q: want auto, sender, receiver or tap", s)
}

// DefaultInFlight is the default CheckOptions.InFlight: many link delays
// of a data centre, far below any retransmit timeout in use.
const DefaultInFlight = 50 * time.Microsecond

// WallClockInFlight is the default CheckOptions.InFlight of a capture taken
// on the wall clock between software hosts (Clock): a response the wire
// handed to a host process may wait in that host's queue, or for the
// process to be scheduled on a busy machine, for milliseconds before the
// host acts on it. One second is far above that and far below the
// retransmit timeouts' sum that would end such a job.
const WallClockInFlight = time.Second

// Clock is how a capture's timestamps were taken (CheckOptions.Clock).
type Clock uint8

const (
	// ClockAuto: from the capture's marker and interface names.
	ClockAuto Clock = iota
	// ClockNIC: a clock whose in-flight times are a data centre's (the
	// emulator's virtual clock, a capture beside a NIC): DefaultInFlight.
	ClockNIC
	// ClockWall: the wall clock between software hosts: WallClockInFlight.
	ClockWall
)

// QPPair says that requests from Src to Dst carrying destination QPN
// ReqQP are answered by ACKs from Dst to Src carrying destination QPN
// RespQP.
type QPPair struct {
	Src, Dst      netip.Addr
	ReqQP, RespQP uint32
}

func (p QPPair) String() string {
	return fmt.Sprintf("%s,%s,%#x=%#x", p.Src, p.Dst, p.ReqQP, p.RespQP)
}

// ParseQPPair reads SRC,DST,REQQPN=RESPQPN, e.g. 10.0.0.1,10.0.0.2,0x12=0x11.
// QPNs may be decimal or 0x-prefixed hex.
func ParseQPPair(s string) (QPPair, error) {
	var p QPPair
	parts := strings.Split(s, ",")
	if len(parts) != 3 {
		return p, fmt.Errorf("pair %q: want SRC,DST,REQQPN=RESPQPN (e.g. 10.0.0.1,10.0.0.2,0x12=0x11)", s)
	}
	var err error
	if p.Src, err = netip.ParseAddr(strings.TrimSpace(parts[0])); err != nil {
		return p, fmt.Errorf("pair %q: source %q is not an IP address or GID", s, parts[0])
	}
	if p.Dst, err = netip.ParseAddr(strings.TrimSpace(parts[1])); err != nil {
		return p, fmt.Errorf("pair %q: destination %q is not an IP address or GID", s, parts[1])
	}
	p.Src, p.Dst = p.Src.Unmap(), p.Dst.Unmap()
	req, resp, ok := strings.Cut(parts[2], "=")
	if !ok {
		return p, fmt.Errorf("pair %q: want REQQPN=RESPQPN after the addresses", s)
	}
	qpn := func(x string) (uint32, error) {
		n, err := strconv.ParseUint(strings.TrimSpace(x), 0, 32)
		if err != nil || n > wire.PSNMask {
			return 0, fmt.Errorf("pair %q: QPN %q is not a 24-bit number", s, x)
		}
		return uint32(n), nil
	}
	if p.ReqQP, err = qpn(req); err != nil {
		return p, err
	}
	if p.RespQP, err = qpn(resp); err != nil {
		return p, err
	}
	return p, nil
}

// Violation is one broken rule. Frame is the frame's number as Wireshark
// shows it (1 for the first frame; `frame.number == N` selects it), Index
// the same frame counted from 0 (`inaemu decode --json`'s index);
// Interface is where it was captured and TimeNS its time since the first
// frame (Wireshark's frame.time_relative). QP and PSN are the frame's
// destination QPN and PSN. Frame numbers inside Detail are Wireshark's
// too.
type Violation struct {
	Rule      string `json:"rule"`
	Frame     int    `json:"frame"`
	Index     int    `json:"index"`
	Interface string `json:"interface"`
	TimeNS    int64  `json:"time_ns"`
	QP        uint32 `json:"qp"`
	PSN       uint32 `json:"psn"`
	Detail    string `json:"detail"`
	// Inferred, when set, is what the verdict assumed (the vantage
	// inferred for the capture, or that a retransmission was not lost
	// again before it).
	Inferred string `json:"inferred,omitempty"`
}

func (v Violation) String() string {
	if fam := familyOf(v.Rule); fam == famINAPS || fam == famPFC {
		// INA-PS and MAC Control frames have no QP or PSN: the detail
		// names the fragment, or the pause.
		return fmt.Sprintf("%s frame %d (%s, %.9fs): %s", v.Rule, v.Frame, v.Interface, float64(v.TimeNS)/1e9, v.Detail)
	}
	s := fmt.Sprintf("%s frame %d (%s, %.9fs) qp %#06x psn %d: %s", v.Rule, v.Frame, v.Interface,
		float64(v.TimeNS)/1e9, v.QP, v.PSN, v.Detail)
	if v.Inferred != "" {
		s += " [inferred: " + v.Inferred + "]"
	}
	return s
}

// LatencySummary summarises latency samples in nanoseconds. The median is
// the ⌈n/2⌉-th smallest sample.
type LatencySummary struct {
	Count    int   `json:"count"`
	MinNS    int64 `json:"min_ns"`
	MedianNS int64 `json:"median_ns"`
	MaxNS    int64 `json:"max_ns"`
}

func summarize(s []int64) LatencySummary {
	if len(s) == 0 {
		return LatencySummary{}
	}
	c := append([]int64(nil), s...)
	sort.Slice(c, func(i, j int) bool { return c[i] < c[j] })
	return LatencySummary{Count: len(c), MinNS: c[0], MedianNS: c[(len(c)-1)/2], MaxNS: c[len(c)-1]}
}

// StreamReport describes one RC connection as one vantage point saw it.
// Src and Dst are the requester and the responder; QP is the destination
// QPN of the requests (null when only responses were seen), RespQP that
// of the ACKs (null when the request stream is unpaired).
type StreamReport struct {
	Vantage         string         `json:"vantage"`
	Src             string         `json:"src"`
	Dst             string         `json:"dst"`
	QP              *uint32        `json:"qp"`
	RespQP          *uint32        `json:"resp_qp"`
	Position        string         `json:"position"`
	DataPackets     int            `json:"data_packets"`
	Retransmissions int            `json:"retransmissions"`
	ACKs            int            `json:"acks"`
	NAKs            int            `json:"naks"`
	RetransLatency  LatencySummary `json:"retransmission_latency"`
	NAKGenLatency   LatencySummary `json:"nak_generation_latency"`
	NAKRespLatency  LatencySummary `json:"nak_response_latency"`
}

// Report is what Check found; it marshals to what `inaemu check --json`
// prints.
type Report struct {
	File string `json:"file,omitempty"`
	// Conforms: the verdict is "conforms" (no violation, nothing
	// unchecked, the whole file read).
	Conforms   bool `json:"conforms"`
	Frames     int  `json:"frames"`
	RoCEFrames int  `json:"roce_frames"`
	BadICRC    int  `json:"bad_icrc"`
	// Compressed counts the frames marked as carrying an INCEPTIONN
	// compressed payload (DSCP 10) with a good ICRC.
	Compressed int `json:"compressed"`
	Malformed  int `json:"malformed"`
	Ghosts     int `json:"not_delivered"` // text: "not delivered"
	// Injected counts the frames whose comments say a fault of the
	// emulator acted on them (ghosts included), InjectedKinds per kind
	// ("corrupt", "duplicate", "delay", ...): they are the faults, not
	// violations; what the transport did about them is still judged.
	Injected int `json:"injected"`
	// Reordered counts frames judged overtaken on the way within
	// ReorderWindowNS instead of violations.
	Reordered       int            `json:"reordered"`
	ReorderWindowNS int64          `json:"reorder_window_ns"`
	InjectedKinds   map[string]int `json:"injected_kinds"`
	VantagePoints   []string       `json:"vantage_points"`
	// Clock is "wall" when the capture was taken on the wall clock
	// between software hosts (CheckOptions.Clock), "" otherwise;
	// InFlightNS is the in-flight tolerance psn-order used and InFlightWhy
	// where it came from, one line.
	Clock       string `json:"clock,omitempty"`
	InFlightNS  int64  `json:"in_flight_ns"`
	InFlightWhy string `json:"in_flight_why"`
	// Inferences say, one line each, where the checker inferred a
	// single-interface capture was taken for a connection and from what
	// evidence; violations that rest on such an inference say so.
	Inferences []string `json:"inferences"`
	// Unpaired are request streams whose responses could not be told
	// apart from another's: the rules that need responses were not
	// applied to them (name them with --pair).
	Unpaired []string `json:"unpaired"`
	// Unchecked lists, one line each, what the checker could not decide:
	// request streams whose responses no pairing attributes (Unpaired), a
	// violation that holds under some of the consistent pairings of
	// ambiguous responses but not all, opcodes outside the rules. Verdict
	// is "violations" when a violation holds, else "undecidable" when
	// something went unchecked or unread (Truncated, AggError), else
	// "conforms" (inaemu check exits 1, 5 and 0 on them, 2 on a file cut
	// short or damaged; --allow-unchecked exits 0 on undecidable).
	Unchecked []string `json:"unchecked"`
	Verdict   string   `json:"verdict"`
	// UncheckedOpcodes counts the good-ICRC frames per opcode the rules
	// do not cover (each also a line of Unchecked); PathMTU is the MTU the
	// READ rules count PSNs with (0: unknown) and PathMTUWhy where it came
	// from.
	UncheckedOpcodes map[string]int `json:"unchecked_opcodes,omitempty"`
	ReadRequests     int            `json:"read_requests"`
	AtomicRequests   int            `json:"atomic_requests"`
	PathMTU          int            `json:"path_mtu"`
	PathMTUWhy       string         `json:"path_mtu_why"`
	// Snapped counts frames cut by the capture's snaplen: excluded from
	// every rule.
	Snapped int `json:"snapped"`
	// Skipped counts frames the reader could not turn into Ethernet (a
	// link type it does not read, a cooked header cut by the snaplen):
	// they keep their frame numbers and are not checked. SkippedWhy is
	// the first one's reason.
	Skipped    int    `json:"skipped"`
	SkippedWhy string `json:"skipped_why,omitempty"`
	// Truncated says where a file cut short or damaged stops being
	// readable: the frames before that point were checked.
	Truncated string `json:"truncated,omitempty"`
	// AggError says why agg-sum could not read the payloads a second
	// time (the file changed or went away between the reads), or was not
	// applied (a switch program whose aggregation header the checker
	// does not know, CheckOptions.SwitchProgram).
	AggError     string `json:"agg_error,omitempty"`
	Connections  int    `json:"connections"`
	AggChecked   int    `json:"agg_checked"`
	AggUnchecked int    `json:"agg_unchecked"`
	AggForwarded int    `json:"agg_forwarded"`
	// AggTreeOrder: some ring was multi-rack, its results checked against
	// the tree-order sum (each leaf's ranks, then the leaves).
	AggTreeOrder bool `json:"agg_tree_order,omitempty"`
	// OwedJudged counts the packets a sender resent after every rank's
	// contribution reached the switch, judged by result-lost for the
	// result the switch owed (rules_owed.go).
	OwedJudged     int            `json:"owed_judged,omitempty"`
	RetransLatency LatencySummary `json:"retransmission_latency"`
	NAKGenLatency  LatencySummary `json:"nak_generation_latency"`
	NAKRespLatency LatencySummary `json:"nak_response_latency"`
	Streams        []StreamReport `json:"streams"`
	Violations     []Violation    `json:"violations"`
	// INA-PS (rules_inaps.go): the INA-PS frames and reliable-channel
	// datagrams seen, the results and partials judged against their
	// contributions, and those not checked (contributions not all
	// captured, a fault's corruption, raw-float frames, frames cut short).
	INAPSFrames    int `json:"inaps_frames,omitempty"`
	INAPSResults   int `json:"inaps_results,omitempty"`
	INAPSPartials  int `json:"inaps_partials,omitempty"`
	INAPSUnchecked int `json:"inaps_unchecked,omitempty"`
	// PFC (rules_pfc.go): the MAC Control frames seen, and the PAUSE and
	// PFC frames judged against what their link's other direction sent.
	PFCFrames int `json:"pfc_frames,omitempty"`
	PFCPauses int `json:"pfc_pauses,omitempty"`
	// CNPs (rules_cnp.go): the CNPs seen, those judged for their rate at
	// their receiver's link, and the CE-marked data packets delivered to
	// a receiver judged for a CNP, and not (no CNP from that receiver in
	// the capture without CheckOptions.CNP on, or too near its end).
	CNPFrames  int `json:"cnp_frames,omitempty"`
	CNPsJudged int `json:"cnps_judged,omitempty"`
	CEJudged   int `json:"ce_judged,omitempty"`
	CEUnjudged int `json:"ce_unjudged,omitempty"`
}

// CheckFile reads a pcap or pcapng file and checks it. The error is about
// the file (unreadable, not a capture, or cut or damaged before its first
// frame); a file cut or damaged later is checked up to that point and the
// report's Truncated says where. Violations are in the report. When
// opt.Interfaces is nil the pcapng interface names are read from the
// file. A program that checks large captures keeps its peak memory near
// what the checker holds by running with GCPercent (inaemu check does).
func CheckFile(path string, opt CheckOptions) (*Report, error) {
	rd, err := pcapio.Open(path)
	if err != nil {
		return nil, err
	}
	rd.Borrow() // add keeps no record's bytes
	rd.SetDigest(frameHash)
	p := newFrameParser()
	p.digested = true
	var damage error
	for {
		r, err := rd.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			// A file cut short (a capture killed mid-write) or damaged
			// further on is checked up to the cut or the damage, as
			// tshark reads it; the report says where.
			var cut *pcapio.TruncatedError
			var bad *pcapio.CorruptError
			var skip *pcapio.SkippedError
			if errors.As(err, &skip) {
				p.addSkipped(&r, skip)
				continue
			}
			if (errors.As(err, &cut) || errors.As(err, &bad)) && p.rep.Frames > 0 {
				damage = err
				break
			}
			rd.Close()
			return nil, err
		}
		p.add(&r)
	}
	if opt.Interfaces == nil {
		opt.Interfaces = rd.Interfaces()
	}
	if opt.SwitchProgram == "" {
		opt.SwitchProgram = pcapio.SwitchProgram(rd.SectionComment())
	}
	if d := pcapio.DType(rd.SectionComment()); d != "" && !opt.DTypeFixed {
		dt, err := tensor.ParseDType(d)
		if err != nil {
			rd.Close()
			return nil, fmt.Errorf("the capture's section comment: %v", err)
		}
		opt.DType = dt
	}
	if opt.InterfaceRates == nil && opt.InterfaceDelays == nil {
		opt.InterfaceRates, opt.InterfaceDelays = interfaceLinks(rd.InterfaceLinks())
	}
	if opt.Clock == ClockAuto && pcapio.WallClock(rd.SectionComment()) {
		opt.Clock, p.clockWhy = ClockWall, "the capture's section comment says "+strconv.Quote(pcapio.WallClockComment)
	}
	rd.Close()
	n := p.fs.len()
	rep := p.check(opt, func(yield func(i int, data []byte) bool) error {
		rd, err := pcapio.Open(path)
		if err != nil {
			return err
		}
		defer rd.Close()
		rd.Borrow() // the aggregation copies what it holds
		for i := range n {
			r, err := rd.Next()
			if skip := (*pcapio.SkippedError)(nil); errors.As(err, &skip) {
				continue // skipped the first time too
			}
			if err != nil {
				return fmt.Errorf("reading frame %d again: %v", i+1, err)
			}
			if !yield(i, r.Data) {
				break
			}
		}
		return nil
	})
	rep.File = path
	if damage != nil {
		rep.Truncated = damage.Error()
		rep.decide()
	}
	return rep, nil
}

// GCPercent is the garbage collector setting (GOGC) for a program that
// checks a large capture: the reader's 64 KiB slabs of records become
// garbage as fast as the file is read, and collecting them early keeps
// the peak RSS near what the checker holds (about 100 bytes per frame and
// the connections' state), not twice it. It is the program's to set
// (debug.SetGCPercent is process-wide), not CheckFile's.
const GCPercent = 25

// frame classes
const (
	fcOther      uint8 = iota // not RoCE: ARP, LLDP, TCP
	fcUnreadable              // not RoCE, but maybe a RoCE frame with a flipped bit
	fcMalformed               // looked like RoCE, broken
	fcRequest                 // RC request (SEND, WRITE, READ request, atomics)
	fcAck                     // RC Acknowledge (ACK, NAK, RNR NAK)
	fcRoCE                    // any other RoCE frame
)

// maxFrameLen bounds the original length a snaplen-cut record may claim
// for the checker to read it as such (jumbo frames fit).
const maxFrameLen = 65535

// packetKey names the packet a frame carries the way the ICRC sees it: the
// frame less its Ethernet header and VLAN tags (a switch gives a copy other
// MAC addresses on the next link), with the fields the ICRC leaves out
// zeroed (IPv4 ToS, TTL and header checksum, IPv6 traffic class, flow
// label and hop limit, the UDP checksum: a fault may flip a bit there and
// the receiver still takes the packet). A copy a duplicate fault made is
// the same packet on every link it crosses. The key is built in buf
// (reused: look it up as m[string(key)], which copies nothing); a frame
// too short for an EtherType after its tags is its own key.
func packetKey(buf, b []byte) []byte {
	off := afterTags(b)
	if off+2 > len(b) {
		return append(buf[:0], b...)
	}
	et := binary.BigEndian.Uint16(b[off:])
	k := append(buf[:0], b[off+2:]...)
	udp := -1
	switch {
	case et == frames.EtherTypeIPv4 && len(k) >= 20 && k[0]>>4 == 4:
		k[1], k[8], k[10], k[11] = 0, 0, 0, 0
		udp = int(k[0]&0x0F) * 4
	case et == frames.EtherTypeIPv6 && len(k) >= 40 && k[0]>>4 == 6:
		k[0], k[1], k[2], k[3], k[7] = 0x60, 0, 0, 0, 0
		udp = 40
	}
	if udp >= 0 && len(k) >= udp+8 {
		k[udp+6], k[udp+7] = 0, 0
	}
	return k
}

// dupCopy says whether data is a copy of a packet a duplicate fault
// copied; dup says data's own comment names that fault (its packet is
// then remembered). Once one has been seen every frame is looked up;
// only a new duplicated packet allocates.
func (p *frameParser) dupCopy(data []byte, dup bool) bool {
	if !dup && len(p.duplicated) == 0 {
		return false
	}
	p.key = packetKey(p.key, data)
	if p.duplicated[string(p.key)] {
		return true
	}
	if dup {
		p.duplicated[string(p.key)] = true
	}
	return dup
}

// otherTraffic: a frame that is plainly not RoCE (ARP, LLDP, TCP). Any
// other frame that does not parse as RoCE may be a RoCE frame whose
// EtherType, IP protocol or UDP port a bit error changed.
func otherTraffic(b []byte) bool {
	if len(b) < 14 {
		return false
	}
	off := 12
	et := binary.BigEndian.Uint16(b[off:])
	for (et == frames.EtherTypeDot1Q || et == frames.EtherTypeQinQ) && len(b) >= off+6 {
		off += 4
		et = binary.BigEndian.Uint16(b[off:])
	}
	l3 := b[off+2:]
	switch et {
	case 0x0806, 0x88CC: // ARP, LLDP
		return true
	case frames.EtherTypeIPv4:
		return len(l3) >= 20 && l3[0]>>4 == 4 && l3[9] == 6
	case frames.EtherTypeIPv6:
		return len(l3) >= 40 && l3[0]>>4 == 6 && l3[6] == 6
	}
	return false
}

type checkFrame struct {
	idx   int
	ts    int64
	iface int
	ghost bool
	// The frame's MAC addresses (hasMAC: it has them) and a hash of its
	// bytes: all the checker keeps of them.
	dstMAC, srcMAC [6]byte
	hasMAC         bool
	// inaps: INA-PS traffic (rules_inaps.go), read again by its rules.
	inaps bool
	hash  uint64
	// The INA header of a WRITE FIRST/ONLY whose payload has room for one
	// (hasINA): its tag, ring and rank.
	hasINA           bool
	inaTag           uint32
	inaRing, inaRank uint8
	inaMsg, inaLen   uint8 // MsgID and MsgLen (result-lost places packets by them)
	// snapped: cut by the snaplen (headers read, ICRC and payload not).
	snapped  bool
	injected bool
	// forged: a copy a spoof fault forged (a flipped payload bit, sent
	// in from another port): no host's contribution.
	forged bool
	// prio is the frame's priority (DSCP's top three bits, else the VLAN
	// PCP, else 0), ipLike that it is IP or RoCEv1 (what PFC pauses), ce
	// that its ECN field is CE; wireLen its length (rules_pfc.go).
	prio       uint8
	ipLike, ce bool
	wireLen    int32
	// dupCopy: the frame's bytes are those of a frame a duplicate fault
	// copied (here or upstream).
	dupCopy bool
	// eff is when the frame left its link's sender, as far as the capture
	// tells: its timestamp less the extra delay a fault gave it.
	eff int64
	// extra is that extra delay (ns; eff is reset on X-out, where the
	// stream rules judge arrival order).
	extra int64
	// notForHost: on X-out, unicast to another MAC than host X's; its NIC
	// drops it (a switch floods a frame whose destination MAC a bit error
	// changed).
	notForHost bool
	class      uint8
	icrcOK     bool
	// payOff and payLen place a parsed frame's payload in its bytes
	// (agg-sum reads it again without parsing).
	payOff, payLen int32
	op             wire.Opcode
	psn            uint32
	qp             uint32
	sport          uint16 // UDP source port (0 for RoCEv1)
	syn            wire.Syndrome
	src, dst       uint32 // addresses, as indexes into the parser's table
}

// checkStreamKey names a stream: source and destination (indexes into
// the checker's address table) and destination QPN.
type checkStreamKey struct {
	src, dst uint32
	qp       uint32
}

func isRequestOp(op wire.Opcode) bool {
	if op.Class() != wire.ClassRC || !op.Known() {
		return false
	}
	switch {
	case op.IsSend(), op.IsWrite():
		return true
	}
	switch op {
	case wire.ReadRequest, wire.CompareSwap, wire.FetchAdd, wire.Flush, wire.AtomicWrite:
		return true
	}
	return false
}

// Check checks a capture's records.
//
// Vantage points. A pcapng interface is one vantage point, except that the
// two directions of a link, when both are named, are merged into one, so
// that a requester's data and the ACKs it receives are seen together:
//
//   - X-in and X-out (the star's portR-in, host R → switch, and portR-out,
//     switch → host R) merge into vantage point X, the link of host R.
//   - A-B and B-A (the link directions of any topology: h3-leaf0 and
//     leaf0-h3, leaf0-spine0 and spine0-leaf0; a parallel link's A-B#1 and
//     B-A#1) merge into vantage point A~B (A~B#1), the node names in byte
//     order. Names are paired one to one, X-in/X-out first; a name with
//     several hyphens tries its splits left to right.
//
// Whether an A~B pair is a host's link, and which direction leaves the
// host, is read from MACs, as for link taps (see agg-sum): direction D
// may leave host M when M is the source of at least nine in ten of D's
// frames with a unicast source and the destination of at least nine in
// ten of the reverse direction's frames with a unicast destination (the
// rest: frames a switch floods). That also holds on a link further on
// that carries only M's traffic (the uplink of a leaf switch with one
// host), and both ways on a host's link in a two-host network; a frame
// crosses its sender's link before any other, so D is ruled out when
// more of M's frames on D that were captured on other interfaces too were
// captured elsewhere first than on D first. If exactly one reading
// remains, D is taken as X-in and the reverse as X-out in everything
// below. Otherwise the pair is watched as a link between switches:
// several hosts' frames cross it, it carries one host's frames further
// on, or both readings remain (a two-host network's host link captured
// alone). A link captured alone gives no first-seen evidence: a one-host
// leaf's uplink captured without the host's link reads as that host's.
//
// A classic pcap file is one vantage point. Every rule is evaluated per
// vantage point, frames in capture order; a merged vantage point
// interleaves its two interfaces by timestamp (ties in capture order),
// each interface keeping its own capture order.
//
// Ghosts. A frame with a comment containing pcapio.GhostComment ("(not
// delivered)") is a frame a fault dropped before the capture point. Ghosts are counted in
// frames and ghosts and are excluded from every rule: they are never
// reported, never count as received by anyone, never repair a gap, never
// contribute to or count as a NetReduce result. The one use made of them
// is what they are evidence of: at a vantage point that watches the
// sender (see positions), a ghost data packet is a packet the sender
// transmitted, so psn-order does not mistake the hole it leaves for a
// skipped PSN, and latencies measure from it.
//
// Injected faults. A frame whose comment says a fault of the emulator
// acted on it (pcapio.FaultOf) is counted in injected and
// injected_kinds. A corrupted frame's bad ICRC is the fault, not an icrc
// violation, and so is that of a byte-identical copy a switch forwarded
// further on; a copy of a frame a duplicate fault copied is the network's
// (never a second NAK of its responder), wherever it is seen: the same
// packet as the ICRC sees it (packetKey: other MAC addresses, or a bit
// flipped in a field the ICRC leaves out, make no other packet). Everything the transport did
// about the faults is judged as usual.
//
// Reordering. On an interface watched from its link's sending end (X-in,
// switch links, taps) a frame a fault delayed or held back is put back
// where its sender sent it: its timestamp less the extra delay its
// comment records. What reordering remains (upstream of the vantage
// point, or in captures from elsewhere) is allowed within the reorder
// window (CheckOptions.ReorderWindow; by default twice the largest extra
// delay the capture's annotations show, at least DefaultInFlight when
// frames were held back, none without annotations): an ACK behind one
// captured within the window before it, and a NAK behind such an ACK, were
// overtaken; PSNs a data packet skips must turn up within the window, and
// a retransmission that seems to start at the wrong PSN waits the window
// for the packet that starts it right. They are counted in reordered.
//
// Snaplen. A frame cut by the capture's snaplen (captured length below
// its length) is counted in snapped; its headers are read when they
// survive whole, and its ICRC and payload are never judged.
//
// Connections. A request stream is (source address, destination address,
// destination QPN) of RC request frames (SEND, WRITE, READ request,
// atomics); a response stream is the RC Acknowledge frames (ACK, NAK, RNR
// NAK), READ responses and Atomic Acknowledges going the other way, keyed
// the same way. At each vantage point a
// request stream S→D is paired with the response stream D→S when it is
// the only request stream S→D and that is the only response stream D→S
// there (streams named by a --pair are left out of that count);
// otherwise by PSN space (several QPs between the same hosts: see
// pairFar), unless a QPPair names its response stream. What PSN spaces
// leave ambiguous is paired every consistent way (pairing.go): a
// violation is reported when it holds under all of them, and listed in
// Report.Unchecked when under some only. A request stream left unpaired
// while responses came back its way (no consistent pairing, or too many)
// is listed in unpaired and unchecked: the rules that need responses were
// not applied to it.
// The connection count pairs the same way over the whole capture: every
// request stream counts once, with its response stream, and a response
// stream nobody pairs with counts on its own.
//
// Positions. Per vantage point a stream is watched from the sender's link
// (the request stream's data are on an X-in interface), from the
// receiver's link (data on X-out; a stream is judged on the side most of
// its frames are on, since a switch that floods a frame with a corrupted
// destination MAC echoes it onto the other side), from a tap (a
// single-interface vantage point or a pcap file: on the sender's side of
// any loss, "tap-sender"; on the receiver's side, "tap-receiver"; loss on
// both sides, "tap-mid"; CheckOptions.Vantage says which, or, by default,
// the evidence decides per connection: see inferVantages), or from a link
// between switches ("mid-path": judged, like the receiver's link, on the
// direction most of its frames are on). psn-order, which judges the
// sender, is applied in full at the sender's link and at sender-side
// taps only: downstream of a loss a skipped PSN and a lost one look the
// same, and NetReduce results leave the switch in completion order, not
// the sender's order. At the other taps what can still be decided is
// (resumeStep): the retransmission after a NAK starts at its PSN. An
// unreadable frame on the
// interface (a bad ICRC, a malformed RoCE frame, or a frame that is neither
// RoCE nor plainly other traffic such as ARP, LLDP or TCP: a bit error in
// the EtherType, IP protocol or UDP port makes one) may have been any
// frame: when k unreadable frames were seen there since the stream's
// previous data packet, a packet is accepted if one of the k PSNs before
// it would have been (they may have been its predecessors), and, in a
// capture that carries READs, any packet ahead (one may have been a READ
// of any number of PSNs). A data packet that
// repeats the PSN of the stream's previous data packet is taken as a
// network duplicate. Without a reorder window (CheckOptions.ReorderWindow;
// auto opens one when the emulator's fault comments show frames held back)
// the network is assumed to keep each stream in order: a frame reordered
// before a sender-side vantage point reads as a psn-order violation, a
// response reordered before any vantage point as ack-regress or nak-psn.
//
// psn-order (paired stream). Responses come from the paired response
// stream at this vantage point (an ACK for q acknowledges q, a NAK for e
// acknowledges e-1). A data packet is accepted when it is the next PSN;
// the PSN of one of the stream's recent NAKs or RNR NAKs (a NAK
// retransmission); the oldest unacknowledged PSN under an acknowledgement
// state that was current at some time within the in-flight window
// (CheckOptions.InFlight) before the packet, or the stream's first PSN
// before any acknowledgement (a timeout retransmission, or a requester
// resuming after what an ACK acknowledged); or, going back with no NAK
// pending, a PSN above what was acknowledged an in-flight window before
// it (a timeout retransmission from an unacknowledged PSN). A NAK is
// pending until its PSN is sent or acknowledged. The window exists because
// the packet may have left the requester before the responses captured
// just before it reached the requester. Unpaired: any PSN up to the
// highest sent plus one. A READ request occupies ceil(length/MTU) PSNs
// (CheckOptions.MTU; rules_readatomic.go): the next PSN is the one after its
// range, and READ responses and Atomic Acknowledges acknowledge their PSN
// (a READ response after a gap in the responses only what precedes its
// READ: the requester re-issues the READ from the first missing one). A
// READ whose PSN count the MTU does not say stops psn-order and nak-psn's
// upper bound for its stream, and the report lists it as unchecked.
//
// nak-psn. A NAK-sequence-error carries the responder's expected PSN, the
// first PSN it is missing. The responder only receives what passed the
// vantage point (the vantage point is on the path), so the good-ICRC,
// delivered data packets seen here bound that PSN from above: at the
// receiver's link (and a tap declared or inferred downstream) the responder gets them
// in this order, and replaying a go-back-N responder over them gives the
// bound (at a tap inferred to be there, the verdict says so); elsewhere
// (mid-path too: an aggregating switch may lie beyond)
// it may get them in another order (a NetReduce switch emits results as
// its aggregators complete), and the bound is the first PSN, from the
// first one seen, that never passed here. ACKs and NAKs
// raise the bound. A NAK beyond the bound asks for a PSN after one the
// responder cannot have received. A NAK at or before the highest PSN
// already acknowledged (by an ACK, or by an earlier NAK within bounds)
// asks for a PSN the responder had received. A NAK below the bound is
// accepted: the PSN may have been lost after the vantage point. This is
// sound at the sender's link, at the receiver's link, mid-path and at any
// tap.
//
// extra-nak. A second NAK with the PSN of the previous NAK, when no
// delivered good-ICRC data packet with that PSN passed this vantage point
// after the previous NAK: the responder cannot have seen the gap
// repaired, and it sends one NAK per gap. Sound on any vantage point on
// the path (a network that duplicates NAKs is reported).
//
// ack-regress. An ACK whose PSN is behind the highest ACK PSN of the same
// response stream at this vantage point (24-bit PSN arithmetic).
// Re-ACKs with the same PSN are fine. Applies to unpaired response
// streams too.
//
// agg-sum. Frames on X-in interfaces (and the host → switch direction of
// a host's A-B link) are what reaches the switch, on X-out what leaves
// it. On a link tap, an interface carrying both directions of one host's
// link (a TAP backend bridge PREFIX-brN, or any single interface with
// CheckOptions.LinkTaps), a frame from the host's MAC (the unicast
// address in the most frames there) reaches the switch and a frame to it
// leaves the switch. Links between switches are skipped. A WRITE FIRST/ONLY on X-in whose payload starts
// with the INA header registers its connection (ring, rank, message id
// extended past 8 bits, first PSN, packets); later WRITE packets of the
// connection are placed at (message, PSN - first PSN) of the message
// their PSN falls in. A WRITE on X-out with the key (source, destination,
// QPN) and PSN of a known connection is a result: its data (after the
// 8-byte INA header at offset 0) must equal the sum, in rank order, of the
// latest contribution of every rank 0..H-1 of the ring (H = highest rank
// seen + 1) for that (message, offset). Results whose contributions were
// not all seen are counted as agg_unchecked; a result that equals its own
// rank's contribution after that aggregator's sum was already verified is
// a released message's late duplicate forwarded unchanged (agg_forwarded).
// Bad-ICRC frames and ghosts are neither contributions nor results.
//
// Latencies, per stream and over all streams: retransmission latency (the
// first transmission of a PSN to its first retransmission; at the
// sender's link and taps, ghosts included), NAK generation latency (the
// first out-of-sequence data packet that revealed a gap to the NAK for
// it; at the receiver's link and taps), NAK response latency (a NAK to the
// first data packet carrying its PSN; at the sender's link and taps).
func Check(recs []pcapio.Record, opt CheckOptions) *Report {
	p := newFrameParser()
	for i := range recs {
		p.add(&recs[i])
	}
	return p.check(opt, func(yield func(i int, data []byte) bool) error {
		for i := range recs {
			if !yield(i, recs[i].Data) {
				break
			}
		}
		return nil
	})
}

// frameParser turns records into checkFrames, keeping of a record's bytes
// only its MAC addresses and a hash (and whole frames in corrupted and
// duplicated, for the few frames a fault comment names): a capture is read
// once for every rule but agg-sum, which reads the payloads again.
type frameParser struct {
	// What the READ and atomic rules need of a few frames (by index),
	// the payload lengths that say the path MTU, and the frames per
	// opcode the rules do not cover (rules_rules_readatomic.go).
	ext       map[int]frameExt
	mtuLens   map[int32]int
	maxPay    int32
	uncovered map[wire.Opcode]int
	// clockWhy: what said the capture was taken on the wall clock.
	clockWhy string
	// digested: the records' Digest is frameHash of their bytes (a
	// reader made it), so add need not hash them again.
	digested bool
	rep      *Report
	fs       *frameStore
	v        frames.View
	bad      []badICRC
	// unpackable are the good-ICRC frames marked compressed whose
	// payload does not unpack, and why; unpacked is scratch.
	unpackable []badPacked
	unpacked   []byte
	// corrupted holds the bytes of frames a corrupt fault hit: a switch
	// that forwards such a frame unchanged passes the fault on.
	corrupted map[string]bool
	// duplicated holds the bytes of frames a duplicate fault copied: the
	// copies, wherever seen, are the network's, not their sender's.
	duplicated map[string]bool
	key        []byte // packetKey's scratch
	padded     []byte
	// addrs interns the addresses frames carry (a frame keeps an index).
	addrs   []netip.Addr
	addrIdx map[netip.Addr]uint32
	// What the fault annotations show of reordering: the largest extra
	// delay, and whether any frame was held back or reordered.
	maxExtra int64
	held     bool
	// Multi-rack NetReduce: the interfaces its switch-to-switch frames
	// were seen on, and per ring the ranks each leaf's partials sum, by
	// the leaf's child index (the tree's reduction order).
	treeIface  map[int]bool
	treeGroups map[uint8]map[uint8]uint64
	// inapsCorrupt: the INA-PS frames a corrupt fault hit.
	inapsCorrupt map[int]bool
	// macCtl: the MAC Control frames (PAUSE, PFC), for rules_pfc.go.
	macCtl []macCtl
}

func (p *frameParser) addr(a netip.Addr) uint32 {
	if i, ok := p.addrIdx[a]; ok {
		return i
	}
	i := uint32(len(p.addrs))
	p.addrs = append(p.addrs, a)
	p.addrIdx[a] = i
	return i
}

func newFrameParser() *frameParser {
	return &frameParser{
		rep: &Report{Violations: []Violation{}, Streams: []StreamReport{}, VantagePoints: []string{},
			InjectedKinds: map[string]int{}, Inferences: []string{}, Unpaired: []string{}, Unchecked: []string{}},
		ext: map[int]frameExt{}, mtuLens: map[int32]int{}, uncovered: map[wire.Opcode]int{},
		fs: &frameStore{}, corrupted: map[string]bool{}, duplicated: map[string]bool{}, addrIdx: map[netip.Addr]uint32{},
	}
}

// frameStore holds the frames in chunks, so that it grows without
// copying (a copy would hold the old and the new array at once).
type frameStore struct {
	chunks [][]checkFrame
	n      int
}

const frameChunk = 1 << 14

func (s *frameStore) len() int { return s.n }

func (s *frameStore) at(i int) *checkFrame { return &s.chunks[i/frameChunk][i%frameChunk] }

// push adds a zero frame and returns it.
func (s *frameStore) push() *checkFrame {
	if s.n%frameChunk == 0 {
		s.chunks = append(s.chunks, make([]checkFrame, frameChunk))
	}
	s.n++
	return s.at(s.n - 1)
}

// hashSeed makes frame hashes equal within a run (only equality is used).
var hashSeed = maphash.MakeSeed()

// frameHash is a frame's hash: its bytes', with hashSeed.
func frameHash(b []byte) uint64 { return maphash.Bytes(hashSeed, b) }

// addSkipped keeps the place of a frame the reader could not read, so
// that the frames after it keep Wireshark's numbers; no rule sees it.
func (p *frameParser) addSkipped(r *pcapio.Record, why *pcapio.SkippedError) {
	i := p.fs.len()
	f := p.fs.push()
	p.rep.Frames++
	f.idx, f.ts, f.iface, f.eff = i, r.Info.Timestamp.UnixNano(), r.Info.InterfaceIndex, r.Info.Timestamp.UnixNano()
	f.class = fcOther
	p.rep.Skipped++
	if p.rep.SkippedWhy == "" {
		p.rep.SkippedWhy = why.Error()
	}
}

// add reads one record.
func (p *frameParser) add(r *pcapio.Record) {
	rep, v := p.rep, &p.v
	i := p.fs.len()
	f := p.fs.push()
	rep.Frames++
	f.idx, f.ts, f.iface = i, r.Info.Timestamp.UnixNano(), r.Info.InterfaceIndex
	f.wireLen = int32(min(r.Info.Length, maxFrameLen))
	f.prio, f.ipLike, f.ce = framePriority(r.Data)
	if len(r.Data) >= 12 {
		f.dstMAC, f.srcMAC, f.hasMAC = [6]byte(r.Data[0:6]), [6]byte(r.Data[6:12]), true
	}
	if p.digested {
		f.hash = r.Digest
	} else {
		f.hash = frameHash(r.Data)
	}
	f.ghost = pcapio.IsGhost(r.Comments)
	if f.ghost {
		rep.Ghosts++
	}
	fault, injected := pcapio.FaultOf(r.Comments)
	f.injected = injected
	f.extra = fault.ExtraDelay.Nanoseconds()
	f.eff = f.ts - f.extra
	p.maxExtra = max(p.maxExtra, fault.ExtraDelay.Nanoseconds())
	p.held = p.held || fault.Has("hold") || fault.Has("reorder")
	f.dupCopy = p.dupCopy(r.Data, fault.Has("duplicate"))
	f.forged = fault.Has("spoof")
	if f.injected {
		rep.Injected++
		for k := range strings.SplitSeq(fault.Kinds, ",") {
			rep.InjectedKinds[k]++
		}
	}
	data := r.Data
	if r.Info.CaptureLength < r.Info.Length && r.Info.Length <= maxFrameLen && len(data) == r.Info.CaptureLength {
		// Cut by the capture's snaplen: read the headers that survive,
		// with the rest zeroed; nothing that needs the lost bytes (the
		// ICRC, the payload) is judged.
		f.snapped = true
		rep.Snapped++
		p.padded = append(append(p.padded[:0], data...), make([]byte, r.Info.Length-len(data))...)
		data = p.padded
	}
	if err := v.Parse(data); err != nil {
		if m, ok := parseMACControl(data, i); ok {
			p.macCtl = append(p.macCtl, m)
			f.class = fcOther
			return
		}
		if _, _, ok := inapsFrame(r.Data); ok {
			p.noteINAPS(i, f, fault.Has("corrupt"))
			return
		}
		if f.snapped {
			f.class = fcUnreadable
			return
		}
		var pe frames.ParseError
		if errors.As(err, &pe) && pe != frames.ErrNotRoCE {
			f.class = fcMalformed
			if !f.ghost {
				rep.Malformed++
			}
		} else if !otherTraffic(r.Data) {
			f.class = fcUnreadable
		}
		return
	}
	f.op, f.psn, f.qp, f.sport = v.Opcode(), v.PSN(), v.DestQP(), v.UDPSrcPort()
	f.payOff, f.payLen = int32(v.PayloadOffset()), int32(len(v.Payload()))
	f.src, f.dst = p.addr(v.SrcAddr().Unmap()), p.addr(v.DstAddr().Unmap())
	f.icrcOK = v.ICRCOK()
	if f.snapped {
		// Usable only when the transport headers were captured whole.
		if v.ICRCOffset()-len(v.Payload())-len(v.Pad()) > r.Info.CaptureLength {
			f.class = fcUnreadable
			return
		}
		f.icrcOK = true
	}
	if h, t := v.INATree(); t != nil && f.icrcOK && !f.snapped {
		p.noteTree(f, h, t)
	}
	if f.icrcOK && !f.snapped && v.Compressed() {
		rep.Compressed++
		var err error
		if p.unpacked, err = inceptionn.Unpack(p.unpacked[:0], v.Payload(), nil); err != nil {
			p.unpackable = append(p.unpackable, badPacked{i, err})
		}
	}
	if op := f.op; op.IsWrite() && op.IsFirst() && len(v.Payload()) >= wire.INALen && !f.snapped {
		h := wire.INA(v.Payload())
		f.hasINA, f.inaTag, f.inaRing, f.inaRank = true, h.Tag(), h.RingID(), h.Rank()
		f.inaMsg, f.inaLen = h.MsgID(), h.MsgLen()
	}
	switch {
	case isRequestOp(f.op):
		f.class = fcRequest
	case f.op == wire.Acknowledge && v.AETH() != nil:
		f.class = fcAck
		f.syn = v.AETH().Syndrome()
	case isReadResponse(f.op) || (f.op == wire.AtomicAcknowledge && v.AETH() != nil && v.AtomicAckETH() != nil):
		// Responses too: the response stream carries them with the ACKs.
		f.class = fcAck
		if a := v.AETH(); a != nil {
			f.syn = a.Syndrome()
		}
	default:
		f.class = fcRoCE
	}
	if !f.snapped {
		p.noteReadAtomic(i, f, v)
	}
	if f.ghost {
		return
	}
	rep.RoCEFrames++
	if f.icrcOK {
		p.noteOpcode(f.op)
	}
	if !f.icrcOK {
		rep.BadICRC++
		if fault.Has("corrupt") {
			p.corrupted[string(r.Data)] = true
			return // the fault, not a violation
		}
		if p.corrupted[string(r.Data)] {
			f.injected = true
			rep.Injected++
			rep.InjectedKinds["corrupt (forwarded)"]++
			return
		}
		p.bad = append(p.bad, badICRC{i, v.WireICRC(), v.ICRC()})
	}
}

// noteTree records a multi-rack switch-to-switch frame: its interface,
// and for a partial the ranks its leaf sums.
func (p *frameParser) noteTree(f *checkFrame, h wire.INA, t wire.INATree) {
	if p.treeIface == nil {
		p.treeIface, p.treeGroups = map[int]bool{}, map[uint8]map[uint8]uint64{}
	}
	p.treeIface[f.iface] = true
	if f.op != wire.OpINAPartial {
		return
	}
	g := p.treeGroups[h.RingID()]
	if g == nil {
		g = map[uint8]uint64{}
		p.treeGroups[h.RingID()] = g
	}
	g[h.Rank()] |= t.Ranks()
}

// treeOrders are the rings whose partials were seen, each as its leaves'
// rank sets in child order, when they partition the ranks 0..n-1.
func (p *frameParser) treeOrders() map[uint8][]uint64 {
	orders := map[uint8][]uint64{}
	for ring, g := range p.treeGroups {
		var order []uint64
		var all uint64
		ok := true
		for child := 0; child < len(g); child++ {
			m, seen := g[uint8(child)]
			ok = ok && seen && m != 0 && all&m == 0
			all |= m
			order = append(order, m)
		}
		if ok && all&(all+1) == 0 { // ranks 0..n-1, each under one leaf
			orders[ring] = order
		}
	}
	return orders
}

// check applies the rules to the frames read; payloads yields the
// records' bytes again, in capture order, for agg-sum.
func (p *frameParser) check(opt CheckOptions, payloads func(yield func(i int, data []byte) bool) error) *Report {
	fs, rep, bad := p.fs, p.rep, p.bad
	var clockWhy string
	opt.Clock, clockWhy = clockFromNames(opt.Clock, p.clockWhy, opt.Interfaces, fs)
	c := newChecker(opt, fs, rep, clockWhy)
	c.ext = p.ext
	c.mtu, c.mtuWhy = p.pathMTU(opt.MTU)
	c.mtuFloor = p.mtuFloor()
	rep.PathMTU, rep.PathMTUWhy = c.mtu, c.mtuWhy
	p.reportUncovered(rep)
	c.addrs, c.addrIdx = p.addrs, p.addrIdx
	c.reorderW = reorderWindow(opt.ReorderWindow, p.maxExtra, p.held, rep)
	c.icrcRule(bad)
	c.packedRule(p.unpackable)
	c.buildVantages()
	for i, vp := range c.ifaceVP {
		if p.treeIface[i] && vp != nil && !vp.tree {
			vp.tree = true
			rep.Inferences = append(rep.Inferences, fmt.Sprintf("%s: carries multi-rack NetReduce's switch-to-switch frames (partials, totals, notifications): connections cross it only as re-sent results, so their stream rules are not applied there", vp.name))
		}
	}
	tag := opt.INATag
	if tag == 0 {
		tag = wire.INATag
	}
	trees := p.treeOrders()
	rep.AggTreeOrder = len(trees) > 0
	// agg-sum reads the payloads again while the stream rules run on
	// the other core: from here on neither writes a frame, the interface
	// sides are settled, and each writes its own fields of the report
	// (agg-sum's violations join the others when both are done; the
	// sort below puts them where they were).
	var aggViolations []Violation
	aggDone := make(chan error, 1)
	go func() {
		hdr, err := aggHeader(opt.SwitchProgram)
		if err != nil && rep.RoCEFrames == 0 {
			// No RoCE frame (an INA-PS capture, whose program, ina-ps,
			// has no WRITE FIRST header): nothing for agg-sum to judge.
			aggDone <- nil
			return
		}
		if err != nil {
			aggDone <- err
			return
		}
		aggDone <- checkAggregation(payloads, fs, c.ifaceNames, c.ifaceSide, c.ifaceHostLink, opt.LinkTaps, opt.DType, tag, hdr, trees, rep,
			func(rule string, f *checkFrame, detail string) {
				aggViolations = append(aggViolations, c.newViolation(rule, f, "", detail))
			})
	}()
	// The inaps family reads the INA-PS frames again the same way.
	var inapsViolations []Violation
	inapsDone := make(chan error, 1)
	if rep.INAPSFrames > 0 {
		go func() {
			sides := newHostSides(fs, c.ifaceNames, c.ifaceSide, c.ifaceHostLink, opt.LinkTaps)
			inapsDone <- checkINAPS(payloads, fs, sides, p.inapsCorrupt, rep, func(rule string, f *checkFrame, detail string) {
				inapsViolations = append(inapsViolations, c.newViolation(rule, f, "", detail))
			})
		}()
	} else {
		inapsDone <- nil
	}
	c.discover()
	alts, left := c.pairingAlternatives()
	if len(alts) == 0 {
		c.streamRules(nil)
	} else {
		c.streamRulesUnderAll(alts)
	}
	c.leftUnpaired(left)
	c.countConnections()
	c.pfcRules(p.macCtl)
	c.cnpRules()
	c.resultLostRule(newHostSides(fs, c.ifaceNames, c.ifaceSide, c.ifaceHostLink, opt.LinkTaps), tag, trees)
	aggErr := <-aggDone
	rep.Violations = append(rep.Violations, aggViolations...)
	inapsErr := <-inapsDone
	rep.Violations = append(rep.Violations, inapsViolations...)
	if u := inapsUnchecked(rep); u != "" {
		rep.Unchecked = append(rep.Unchecked, u)
	}
	if inapsErr != nil {
		rep.Unchecked = append(rep.Unchecked, "inaps-sum and inaps-partial stopped: "+inapsErr.Error())
	}
	c.finish()

	sort.SliceStable(rep.Violations, func(i, j int) bool {
		a, b := rep.Violations[i], rep.Violations[j]
		if a.Frame != b.Frame {
			return a.Frame < b.Frame
		}
		return a.Rule < b.Rule
	})
	if aggErr != nil {
		rep.AggError = aggErr.Error()
	}
	rep.decide()
	return rep
}

// decide sets the verdict, once what went unchecked or unread is known
// (CheckFile sets Truncated after check and decides again).
func (rep *Report) decide() {
	switch {
	case len(rep.Violations) > 0:
		rep.Verdict = "violations"
	case len(rep.Unchecked) > 0 || rep.Truncated != "" || rep.AggError != "":
		rep.Verdict = "undecidable"
	default:
		rep.Verdict = "conforms"
	}
	// A CI gate reading conforms must not pass what went unchecked.
	rep.Conforms = rep.Verdict == "conforms"
}

// afterTags is the offset of a frame's EtherType behind its 802.1Q and
// QinQ tags.
func afterTags(b []byte) int {
	off := 12
	for off+4 <= len(b) {
		et := binary.BigEndian.Uint16(b[off:])
		if et != frames.EtherTypeDot1Q && et != frames.EtherTypeQinQ {
			break
		}
		off += 4
	}
	return off
}
