// Package roce is a software RoCE Reliable-Connection transport: queue
// pairs with a requester (segmentation, PSNs, AckReq policy, go-back-N,
// retransmit timer, retry exhaustion), a responder (expected PSN, one NAK
// per gap, duplicate re-ACK, rkey and bounds checks) and a completer, after
// Linux rxe as docs/roce.md §3-5 describes it (and the IB spec where
// that file says rxe departs from it). RDMA READ, compare-and-swap and
// fetch-and-add, with the responder's resources that re-execute a
// duplicate READ and answer a duplicate atomic from its saved result, are
// docs/roce.md §8.
//
// A QP does no I/O: it is handed received frames (Receive) and asked for
// frames to send (NextFrame), and every timer runs on an injected Clock. It
// is not safe for concurrent use; one event loop drives it.
package roce

import (
	"encoding/binary"
	"fmt"
	"time"
)

// State is the QP state (IB verbs names).
type State uint8

const (
	StateReset State = iota
	StateInit
	StateRTR
	StateRTS
	StateError
)

func (s State) String() string {
	return [...]string{"RESET", "INIT", "RTR", "RTS", "ERROR"}[s]
}

// Status is a work completion status, named like ibv_wc_status.
type Status uint8

const (
	StatusSuccess Status = iota
	StatusRetryExcErr
	StatusRNRRetryExcErr
	StatusRemAccessErr
	StatusRemInvReqErr
	StatusRemOpErr
	StatusWRFlushErr
	StatusLocLenErr
	StatusLocProtErr
	// StatusBadRespErr: the responder answered with an opcode, length or
	// syndrome the request does not allow (ibv_wc_status IBV_WC_BAD_RESP_ERR).
	StatusBadRespErr
)

func (s Status) String() string {
	return [...]string{"SUCCESS", "RETRY_EXC_ERR", "RNR_RETRY_EXC_ERR", "REM_ACCESS_ERR",
		"REM_INV_REQ_ERR", "REM_OP_ERR", "WR_FLUSH_ERR", "LOC_LEN_ERR", "LOC_PROT_ERR", "BAD_RESP_ERR"}[s]
}

// Opcode of a work request.
type WROpcode uint8

const (
	WRWrite WROpcode = iota
	WRWriteImm
	WRSend
	WRSendImm
	// WRRead reads len(Local) bytes at RemoteVA into Local (docs/roce.md §8).
	WRRead
	// WRCompSwap and WRFetchAdd operate on the 8 bytes at RemoteVA (8-byte
	// aligned); Local (8 bytes) receives the original value.
	WRCompSwap
	WRFetchAdd
)

func (o WROpcode) String() string {
	return [...]string{"RDMA_WRITE", "RDMA_WRITE_WITH_IMM", "SEND", "SEND_WITH_IMM",
		"RDMA_READ", "ATOMIC_CMP_AND_SWP", "ATOMIC_FETCH_AND_ADD"}[o]
}

// ReadOrAtomic reports whether the operation waits for response data (a
// READ or an atomic), as opposed to an ACK.
func (o WROpcode) ReadOrAtomic() bool { return o >= WRRead }

// Atomic reports whether the operation is an atomic.
func (o WROpcode) Atomic() bool { return o == WRCompSwap || o == WRFetchAdd }

// SendWR is a send work request. Local is read when its packets are built
// (and again on retransmission): it must not change until the WR completes.
// For a READ, Local is where the data lands (its length is the READ's);
// for an atomic, the 8 bytes of Local receive the original remote value,
// little-endian, as a little-endian host holds a uint64 (Uint64At).
type SendWR struct {
	ID       uint64
	Opcode   WROpcode
	Local    []byte
	RemoteVA uint64
	RKey     uint32
	Imm      uint32
	// SwapAdd is the value a fetch-and-add adds or a compare-and-swap
	// writes; Compare is what compare-and-swap compares the remote value with.
	SwapAdd, Compare uint64
	// Signaled asks for a completion on success; errors always complete.
	Signaled bool
}

// RecvWR is a receive work request: a buffer for one incoming SEND or the
// immediate data of a WRITE WITH IMMEDIATE.
type RecvWR struct {
	ID  uint64
	Buf []byte
}

// Completion is a work completion.
type Completion struct {
	WRID   uint64
	Status Status
	Opcode WROpcode // for receive completions: WRSend, WRSendImm or WRWriteImm
	Recv   bool
	Len    int // bytes received (receive completions)
	Imm    uint32
	HasImm bool
	QPN    uint32
}

func (c Completion) String() string {
	dir := "send"
	if c.Recv {
		dir = "recv"
	}
	return fmt.Sprintf("qp=%d %s wr=%d %s %s len=%d", c.QPN, dir, c.WRID, c.Opcode, c.Status, c.Len)
}

// CQ is a completion queue.
type CQ struct {
	entries []Completion
	// Notify, if set, is called after a completion is queued (like a
	// completion channel event). It runs inside the QP's processing, so it
	// must not call back into the QP: schedule a poll instead.
	Notify func()
}

// NewCQ makes a completion queue with room for n entries before it grows.
func NewCQ(n int) *CQ { return &CQ{entries: make([]Completion, 0, n)} }

// Push queues a completion from a source other than a QP of this
// package (an emulated host's GPU interconnect, say), as a QP would.
func (q *CQ) Push(c Completion) { q.push(c) }

func (q *CQ) push(c Completion) {
	q.entries = append(q.entries, c)
	if q.Notify != nil {
		q.Notify()
	}
}

// Poll removes and returns up to len(out) completions, oldest first.
func (q *CQ) Poll(out []Completion) int {
	n := copy(out, q.entries)
	rest := copy(q.entries, q.entries[n:])
	q.entries = q.entries[:rest]
	return n
}

// Len is the number of completions waiting.
func (q *CQ) Len() int { return len(q.entries) }

// Access flags of a memory region.
type Access uint8

const (
	AccessLocalWrite Access = 1 << iota
	AccessRemoteWrite
	AccessRemoteRead
	AccessRemoteAtomic
)

// MR is a registered memory region: Buf is the memory at address Addr.
//
// With Len set (larger than len(Buf)) the region is Len bytes long but
// Buf holds only a window of it, as a ring: address a is
// Buf[(a-Addr) mod len(Buf)]. A receiver that consumes each message as it
// completes, before the sender may reuse its place, needs no more memory
// than the messages in flight (an emulated worker verifying results of a
// large tensor as they land).
type MR struct {
	Addr   uint64
	Buf    []byte
	Len    uint64
	RKey   uint32
	Access Access
}

// Size is the region's length in bytes.
func (mr *MR) Size() uint64 {
	if mr.Len > uint64(len(mr.Buf)) {
		return mr.Len
	}
	return uint64(len(mr.Buf))
}

// Write copies p to the region at offset off (a ring wraps).
func (mr *MR) Write(off uint64, p []byte) { mr.move(off, p, true) }

// Read copies the region's bytes at offset off into p (a ring wraps),
// as the host reads what a WRITE placed.
func (mr *MR) Read(off uint64, p []byte) { mr.move(off, p, false) }

// move copies p into the region at off (in) or the region's bytes at off
// into p, piece by piece across a ring's wrap.
func (mr *MR) move(off uint64, p []byte, in bool) {
	if uint64(len(mr.Buf)) >= mr.Size() { // a plain region: one copy, as far as it reaches
		if in {
			copy(mr.Buf[off:], p)
		} else {
			copy(p, mr.Buf[off:])
		}
		return
	}
	for len(p) > 0 {
		at := off % uint64(len(mr.Buf))
		var n int
		if in {
			n = copy(mr.Buf[at:], p)
		} else {
			n = copy(p, mr.Buf[at:])
		}
		p, off = p[n:], off+uint64(n)
	}
}

// Uint64At is the 8 bytes of p at off as a little-endian host reads them:
// the value an atomic operates on, and the original value it returns.
func Uint64At(p []byte, off int) uint64 { return binary.LittleEndian.Uint64(p[off:]) }

// PutUint64At stores v at p[off:] as a little-endian host does.
func PutUint64At(p []byte, off int, v uint64) { binary.LittleEndian.PutUint64(p[off:], v) }

// PD is a protection domain: the memory regions a responder may target.
type PD struct {
	mrs map[uint32]*MR
}

func NewPD() *PD { return &PD{mrs: map[uint32]*MR{}} }

// Register adds mr; its RKey must be unique in the domain.
func (pd *PD) Register(mr *MR) error {
	if _, dup := pd.mrs[mr.RKey]; dup {
		return fmt.Errorf("roce: rkey %#x already registered", mr.RKey)
	}
	pd.mrs[mr.RKey] = mr
	return nil
}

// Deregister removes the region with rkey.
func (pd *PD) Deregister(rkey uint32) { delete(pd.mrs, rkey) }

// lookup returns the region for [va, va+n) with access acc, or nil.
func (pd *PD) lookup(rkey uint32, va uint64, n uint64, acc Access) *MR {
	mr := pd.mrs[rkey]
	if mr == nil || mr.Access&acc != acc {
		return nil
	}
	end := mr.Addr + mr.Size()
	if va < mr.Addr || va+n < va || va+n > end {
		return nil
	}
	return mr
}

// Counters are per-QP counters named like the Linux rxe / mlx5 ones, so a
// capture can be cross-checked against them (docs/roce.md §6).
type Counters struct {
	SentPkts            uint64 // every frame sent
	RcvdPkts            uint64 // every frame received and accepted
	RetransmittedPkts   uint64 // request packets sent again (go-back-N or timeout)
	PacketSeqErr        uint64 // NAK PSN-sequence-error received (requester)
	LocalAckTimeoutErr  uint64 // retransmit timer expiries that retried
	RNRNakRetryErr      uint64 // RNR NAKs received
	OutOfSequence       uint64 // NAK PSN-sequence-error sent (responder)
	OutOfSeqDropped     uint64 // out-of-order requests silently dropped after the NAK
	DuplicateRequest    uint64 // duplicate requests re-ACKed
	RxICRCErrors        uint64 // frames dropped for a bad ICRC (never NAKed)
	RxDropped           uint64 // frames dropped for addressing, P_Key or state
	SendRNRErr          uint64 // RNR NAKs sent (no receive WQE)
	RemoteErrors        uint64 // NAK 0x61-0x63 sent
	ImpliedNAKSeqErr    uint64 // retries started because READ/atomic responses were missing (a later response or ACK came first)
	ReadResponses       uint64 // READ response packets sent, first transmissions and re-executions
	AtomicsExecuted     uint64 // atomics executed on memory (never a duplicate)
	AtomicReplays       uint64 // duplicate atomics answered from the replay cache
	RetryExceededErr    uint64 // RETRY_EXC_ERR completions
	RNRRetryExceededErr uint64 // RNR_RETRY_EXC_ERR completions
	ResponsesDropped    uint64 // responses dropped because their frame could not be built (a NextFrame buffer below MTU plus headers)
}

// Config is what a QP is connected with (ibv_modify_qp to RTR and RTS).
type Config struct {
	// MTU is the path MTU: 256, 512, 1024, 2048 or 4096.
	MTU int
	// SQPSN is the first PSN this QP sends; RQPSN the first it expects.
	SQPSN, RQPSN uint32
	// Timeout is the local ACK timeout exponent: 4.096 µs × 2^Timeout;
	// 0 disables the retransmit timer.
	Timeout uint8
	// AdaptiveTimeout: the retransmit timer adapts to measured ACK round
	// trips (RFC 6298, with AckTimeout(Timeout) as its floor and a backoff
	// per expiry; rto.go), as hosts on the wall clock need. Off, the timer
	// is AckTimeout(Timeout), the model's, exactly.
	AdaptiveTimeout bool
	// RetryCnt (0-7) is how many times a request is retried after a
	// timeout or NAK before RETRY_EXC_ERR. 7 means seven retries.
	RetryCnt uint8
	// RNRRetry (0-7) is how many RNR NAKs are retried; 7 means forever.
	RNRRetry uint8
	// MinRNRTimer is the 5-bit RNR timer code this QP sends in RNR NAKs.
	MinRNRTimer uint8
	// MaxUnacked bounds PSNs in flight. 0 means the profile's limit
	// (Commodity: 2^23-1, the PSN space's half; RXE: 128).
	MaxUnacked int
	// Profile is the NIC behaviour the transport models (docs/roce.md §7).
	Profile Profile
	// MaxSendWR and MaxRecvWR bound the queues. 0 means 1024.
	MaxSendWR, MaxRecvWR int
	// MaxRdAtomic (ibv_qp_attr.max_rd_atomic, the initiator depth) bounds
	// the READs and atomics this QP's requester has outstanding;
	// MaxDestRdAtomic (max_dest_rd_atomic, the responder resources) is how
	// many of the peer's READs and atomics the responder remembers for
	// replaying duplicates. 0 means DefaultRdAtomic; 1..255. A requester
	// that keeps MaxRdAtomic at most the peer's MaxDestRdAtomic never has a
	// duplicate dropped for want of its record (docs/roce.md §8).
	MaxRdAtomic, MaxDestRdAtomic int
}

// DefaultRdAtomic is the default initiator depth and responder resources:
// 16, what ConnectX NICs report as max_qp_rd_atom (docs/roce.md §8).
const DefaultRdAtomic = 16

// Profile is a consistent set of transport behaviours of one kind of NIC,
// where implementations differ or depart from the IB specification
// (docs/roce.md §7 gives each behaviour's source).
type Profile uint8

const (
	// Commodity models a hardware RNIC that follows the specification:
	// any response that advances the oldest unacknowledged PSN (an ACK, or
	// the implicit acknowledgement a NAK carries) is forward progress: it
	// resets the retry counters and ends the retry in progress, so a NAK
	// for a later gap starts a new go-back-N at once. retry_cnt 7 means
	// seven retries. PSNs in flight are bounded only by the PSN space.
	Commodity Profile = iota
	// RXE is Linux soft-RoCE: at most 128 unacknowledged PSNs; while a
	// NAK- or timeout-driven retry runs, later NAKs are ignored until an
	// ACK (or a NAK that completes a WQE) is seen; retry_cnt 7 is infinite.
	RXE
)

// Profiles lists the profiles by name.
var Profiles = []Profile{Commodity, RXE}

func (p Profile) String() string {
	switch p {
	case Commodity:
		return "commodity"
	case RXE:
		return "rxe"
	}
	return fmt.Sprintf("profile(%d)", uint8(p))
}

// ParseProfile reads a profile name.
func ParseProfile(s string) (Profile, error) {
	for _, p := range Profiles {
		if p.String() == s {
			return p, nil
		}
	}
	return 0, fmt.Errorf("NIC profile %q: want commodity or rxe", s)
}

// maxUnacked is the profile's limit on PSNs in flight.
func (p Profile) maxUnacked() int {
	if p == RXE {
		return 128 // rxe_param.h RXE_MAX_UNACKED_PSNS
	}
	return 1<<23 - 1 // IBA: outstanding PSNs stay within half the 24-bit space
}

// AckTimeout is the retransmit timer period for the Timeout exponent.
func AckTimeout(exp uint8) time.Duration { return time.Duration(4096) << exp }

// rnrTimes maps the RNR timer code to its delay (docs/roce.md §4).
var rnrTimes = [32]time.Duration{
	655360 * time.Microsecond, 10 * time.Microsecond, 20 * time.Microsecond, 30 * time.Microsecond,
	40 * time.Microsecond, 60 * time.Microsecond, 80 * time.Microsecond, 120 * time.Microsecond,
	160 * time.Microsecond, 240 * time.Microsecond, 320 * time.Microsecond, 480 * time.Microsecond,
	640 * time.Microsecond, 960 * time.Microsecond, 1280 * time.Microsecond, 1920 * time.Microsecond,
	2560 * time.Microsecond, 3840 * time.Microsecond, 5120 * time.Microsecond, 7680 * time.Microsecond,
	10240 * time.Microsecond, 15360 * time.Microsecond, 20480 * time.Microsecond, 30720 * time.Microsecond,
	40960 * time.Microsecond, 61440 * time.Microsecond, 81920 * time.Microsecond, 122880 * time.Microsecond,
	163840 * time.Microsecond, 245760 * time.Microsecond, 327680 * time.Microsecond, 491520 * time.Microsecond,
}

// RNRDelay is the delay an RNR NAK with timer code c asks for.
func RNRDelay(c uint8) time.Duration { return rnrTimes[c&31] }
