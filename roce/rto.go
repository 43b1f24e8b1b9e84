package roce

import (
	"time"

	"github.com/inaemu/inaemu/frames/wire"
)

// The wall-clock retransmission timer (Config.AdaptiveTimeout).
//
// A NIC's local ACK timeout is a fixed period, 4.096 µs × 2^Timeout, and
// the emulator keeps it so: in virtual time a round trip costs what the
// model says, and a run is the same byte for byte on every machine. On the
// wall clock (the TAP backend, a device under test) a round trip costs
// whatever the machine gives: on a busy one a window of frames waits in
// the kernel's and the device's queues far longer than 67 ms, the timer
// fires with nothing lost, the requester resends the whole window into
// the same queues, and the retries run out (RETRY_EXC_ERR) with no fault
// at all. So wall-clock requesters estimate the round trip as TCP does
// (RFC 6298): each sample is the time from a PSN's first transmission to
// the acknowledgement that covers it (one PSN timed at a time; none whose
// PSN was sent again: Karn's rule), SRTT and RTTVAR are smoothed with
// gains 1/8 and 1/4, and the timer's period is
//
//	RTO = max(AckTimeout(Timeout), SRTT + 4·RTTVAR) << backoff
//
// The configured timeout is the floor: a quiet machine recovers from a
// loss as fast as the emulator does. Each expiry doubles the period (the
// backoff, at most 2^rtoMaxBackoff times) until a fresh sample arrives,
// so a stalled machine's retries spread out instead of feeding its
// queues; the period never exceeds rtoCeiling floors. The retry budget
// (RetryCnt) is unchanged: a device that really stopped answering still
// fails, with RetryCnt 7 after 1+2+4+8+16·4 = 79 floors (5.3 s at the
// 67 ms floor) instead of 8. The backoff's bound is that cost: doubling
// to RFC 6298's minute would make each run against a mute device (a
// conformance case and every step of its shrinking) last minutes.
type rto struct {
	on           bool
	srtt, rttvar time.Duration
	sampled      bool // srtt and rttvar hold an estimate
	backoff      uint8
	timing       bool          // timedPSN's first transmission is being timed
	timedPSN     uint32        // the PSN timed
	sentAt       time.Duration // when it was sent
}

// rtoCeiling bounds the adaptive period, in floors (AckTimeout(Timeout)).
const rtoCeiling = 64

// rtoMaxBackoff bounds the backoff's doublings: 16 periods, a second at
// the 67 ms floor, outlast a stalled machine's round trip.
const rtoMaxBackoff = 4

// period is the timer's next period for a floor of AckTimeout(Timeout).
func (t *rto) period(floor time.Duration) time.Duration {
	if !t.on {
		return floor
	}
	d := floor
	if t.sampled {
		d = max(d, t.srtt+4*t.rttvar)
	}
	d <<= t.backoff
	return min(d, rtoCeiling*floor)
}

// sent notes that psn was transmitted at now, for the first time when
// first: with no PSN being timed, it is timed.
func (t *rto) sent(now time.Duration, psn uint32, first bool) {
	if t.on && first && !t.timing {
		t.timing, t.timedPSN, t.sentAt = true, psn, now
	}
}

// retried: PSNs are being sent again (a timeout or a NAK). The PSN being
// timed may be one of them, and an acknowledgement would not say which
// transmission it answers (Karn): the timing is dropped.
func (t *rto) retried() { t.timing = false }

// expired: the timer fired; the next period doubles.
func (t *rto) expired() {
	if t.on && t.backoff < rtoMaxBackoff {
		t.backoff++
	}
}

// acked: everything before psn is acknowledged at now. If that covers the
// PSN being timed, its round trip is a sample (RFC 6298 §2), and the
// backoff ends.
func (t *rto) acked(now time.Duration, psn uint32) {
	if !t.timing || wire.PSNDiff(psn, t.timedPSN) <= 0 {
		return
	}
	t.timing = false
	r := now - t.sentAt
	if !t.sampled {
		t.srtt, t.rttvar, t.sampled = r, r/2, true
	} else {
		t.rttvar += (max(t.srtt-r, r-t.srtt) - t.rttvar) / 4
		t.srtt += (r - t.srtt) / 8
	}
	t.backoff = 0
}

// RTO reports the retransmit timer's state: the period it would arm with
// now, and the smoothed round trip (zero before the first sample). With
// AdaptiveTimeout off the period is AckTimeout(Timeout) and srtt zero.
func (q *QP) RTO() (period, srtt time.Duration) {
	return q.req.rto.period(AckTimeout(q.req.timeout)), q.req.rto.srtt
}
