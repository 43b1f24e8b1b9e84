// Package capcheck is the capture checker behind `inaemu check`. It reads
// a capture of RoCE traffic taken anywhere (pcap or pcapng: the
// emulator's per-link capture, dumpcap on the TAP backend's bridges, a
// mirror port next to a real NIC or switch) and reports every violation
// the capture proves; a capture may miss frames lost before it, and
// nothing is reported that such a loss could explain:
//
//   - icrc: a RoCE frame whose ICRC is wrong.
//   - psn-order: a requester sent a data packet that is neither the next
//     PSN, nor a retransmission starting at a pending NAK's PSN, nor (with
//     no NAK pending) a timeout retransmission from an unacknowledged PSN;
//     from a capture downstream of loss, only a retransmission after a NAK
//     that does not start at its PSN. A READ request occupies
//     ceil(length/MTU) PSNs (one for length 0), every other request one.
//   - nak-psn: a NAK-sequence-error that does not carry the first missing
//     PSN, as far as the capture proves it (the responder's expected PSN
//     moves past a READ's whole range).
//   - extra-nak: a second NAK for a gap not yet repaired.
//   - ack-regress: an ACK behind an earlier ACK of the same connection.
//   - read-psn: a READ response (FIRST, MIDDLE, LAST, ONLY) whose PSN lies
//     in no range of a READ request that passed the vantage point, whose
//     opcode does not fit its place in the READ (ONLY for a one-packet
//     READ at its PSN, FIRST at a READ's first PSN, LAST at its last,
//     MIDDLE between), or that answers a PSN more often than READ
//     requests covering it passed (a duplicate READ is executed again
//     from its own PSN); and a READ request the requester re-issued inside
//     an earlier READ's range whose RETH is not the rest of that READ (VA
//     and length moved on by the PSNs skipped times the MTU).
//   - atomic-psn: an Atomic Acknowledge whose PSN no compare-and-swap or
//     fetch-and-add carried, or more of them for a PSN than atomic
//     requests with it.
//   - atomic-replay: an Atomic Acknowledge for a PSN already answered with
//     another original value (a duplicate atomic must be answered from
//     the responder's replay cache, not executed again).
//   - agg-sum: a NetReduce result that is not the rank-order sum of the
//     contributions seen at the switch; for a multi-rack ring (its
//     switch-to-switch partials seen), the tree-order sum: each leaf's
//     ranks in rank order, then the leaves' partials in child order.
//     Links that carry those frames are kept out of the stream rules:
//     a connection's packets cross them only as re-sent results.
//   - result-lost: a NetReduce result the switch owed a receiver and
//     never sent: every rank's contribution of the packet reached the
//     switch, other ranks' results left, this rank's did not before its
//     sender resent the packet; judged once a later result to the same
//     receiver (of a packet that rank's own later contribution completed)
//     shows the switch had handled the resend; applied to faultwire's
//     capture of a device, which writes what the switch sent before the
//     link's faults act (rules_owed.go).
//   - inaps-sum: an INA-PS result (ATP's frame, EtherType 0x0700: flags
//     with ACK, or a reliable-channel answer or parameter) whose bitmap is
//     not the job's full mask or whose values are not the wrapping int32
//     sum of every worker's gradient for its (job, key, seq); and a
//     worker's copies of one gradient (original, duplicates, channel
//     retransmissions) that differ. See rules_inaps.go.
//   - inaps-partial: an INA-PS partial (Collision without ACK, or a
//     reminder's return with a bitmap) that is not the wrapping int32 sum
//     of the gradients its bitmap names. A result or partial whose
//     gradients the capture does not all show is not checked (listed in
//     Report.Unchecked: the verdict is undecidable).
//   - packed: a WRITE or SEND marked as carrying a compressed payload
//     (DSCP 10, INCEPTIONN's ToS 0x28) whose good-ICRC payload does not
//     unpack (frames/inceptionn's packed form).
//   - pfc-format: a MAC Control frame (EtherType 0x8808) that is no
//     well-formed IEEE 802.3x PAUSE or IEEE 802.1Qbb PFC frame: VLAN-tagged
//     (the receiving MAC does not see it as one), not minFrameSize (60
//     bytes as captured without the FCS, 64 with it), a PFC frame not to
//     01:80:C2:00:00:01 or whose class-enable vector has its reserved
//     high octet set, or another opcode to that address. Quanta of
//     priorities whose enable bit is clear are ignored by the receiver
//     and not judged. See rules_pfc.go.
//   - pfc-paused-send: a frame of priority p (DSCP >> 3, else the VLAN
//     PCP, else 0) on a link direction whose transmitter a PAUSE or PFC
//     frame captured on the reverse direction had paused for p (until
//     quanta x 512 bit times at the link's rate, CheckOptions.LinkRate,
//     else the capture's if_speed, after its arrival; a refresh reloads
//     the timer, quanta 0 resumes), that must have started after the
//     pause arrived (beyond its own line time and CheckOptions.LinkDelay,
//     else the link's propagation delay as the capture states it) and
//     before it ended.
//   - pfc-deadlock: a cycle of directions between switches (A-B link
//     names that are no host's link) all still paused for one priority
//     at the end of the capture, together for at least
//     CheckOptions.DeadlockAfter.
//   - cnp-missing: a CE-marked SEND, WRITE or READ response delivered to
//     a receiver (on its host link) whose NP is on, with no CNP from the
//     receiver for the connection leaving it within the CNP interval plus
//     the in-flight tolerance either side. See rules_cnp.go.
//   - cnp-rate: two CNPs from one receiver for one QP, as they leave it,
//     closer than the CNP interval less CheckOptions.CNPTolerance.
//
// Rules is the same list as a table (name, family, one-line doc, the
// report's count of what the rule judged), from which docs/check.md's
// list, the JUnit testcases and the text report's per-family lines come;
// each family's code is a file of its own (rules_icrc.go, rules_packed.go,
// rules_psn.go, rules_readatomic.go, rules_agg.go, rules_inaps.go,
// rules_pfc.go, rules_cnp.go), the machinery that
// runs the stream rules per vantage point and connection stream.go.
//
// Which opcodes each rule covers (IBTA Vol. 1 §9.2 opcode numbers, RC
// unless named):
//
//	rule           judges                                  uses as evidence
//	icrc           every RoCE frame                        -
//	psn-order      SEND, WRITE (0-11), READ request (12),  ACK/NAK/RNR NAK (17), READ
//	               CmpSwap (19), FetchAdd (20)             responses (13-16), Atomic ACK (18)
//	nak-psn        NAK-sequence-error (17, syndrome 0x60)  requests 0-12, 19, 20
//	extra-nak      NAK-sequence-error (17)                 requests 0-12, 19, 20
//	ack-regress    ACK (17)                                -
//	read-psn       READ responses (13-16), re-issued READ  READ requests (12)
//	               requests (12)
//	atomic-psn     Atomic Acknowledge (18)                 CmpSwap, FetchAdd (19, 20)
//	atomic-replay  Atomic Acknowledge (18)                 -
//	agg-sum        inaemu's NetReduce WRITEs (6-11), INA   -
//	               partials and totals (0xE0-0xE2)
//	result-lost    NetReduce WRITEs (6-11) leaving the     WRITEs (6-11) reaching
//	               switch                                  the switch
//	inaps-sum,     INA-PS frames (EtherType 0x0700) and    -
//	inaps-partial  channel datagrams (UDP 4792), no RoCE
//	packed         SEND and WRITE marked DSCP 10           -
//	cnp-missing    CE-marked SEND, WRITE, READ responses   CNPs (0x81)
//	cnp-rate       CNPs (0x81)                             -
//
// No go-back-N rule applies to CNPs (0x81: congestion notifications carry
// no transport state; the cnp family judges them), and no rule to UD
// (0x64, 0x65: unreliable by design); they are counted as RoCE frames. Every other opcode (UC, RD, XRC, RC FLUSH,
// ATOMIC WRITE, an unknown one) is counted per opcode in
// Report.UncheckedOpcodes and listed in Report.Unchecked: the verdict
// is then undecidable (inaemu check exits 5), never conforming by
// silence.
//
// Where a single-interface capture was taken (at the requester, at the
// responder, mid-path) is inferred per connection from the evidence
// unless given (receiver-side evidence is shared by the connections
// between the same hosts in one direction), several QPs between two hosts
// pair by their PSN spaces (where those overlap, every pairing consistent
// with the ACKs' timing and the UDP source ports is tried, and what holds
// under some only is undecidable), the in-flight tolerance follows the
// capture's clock (the wall clock of faultwire and the TAP backend, a
// data centre's otherwise),
// frames the emulator's faults acted on are counted as injected rather
// than judged as violations, reordering the capture shows is allowed
// within a window, and snaplen-cut frames are counted and left out of
// what their lost bytes would decide. It also measures retransmission, NAK generation and NAK response
// latencies. The inputs are the capture's records, its pcapng interface
// names, which say where each frame was seen (vantage points: X-in and
// X-out, A-B and B-A link directions, bridges, single taps), and the
// capture comments that mark frames a fault dropped (pcapio.IsGhost).
// Vantage points, connections, pairing, where each rule is applied and
// why it is sound there are described on Check.
//
// The package depends on wire formats only: frames and frames/wire to
// parse, the pcap reader, and the tensor element types to add NetReduce
// payloads. It never imports the emulator or the RoCE transport whose
// behaviour it judges, so it judges captures from any device by the same
// rules, and a bug in the emulator cannot hide in the checker.
package capcheck
