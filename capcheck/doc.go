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
//     that does not start at its PSN.
//   - nak-psn: a NAK-sequence-error that does not carry the first missing
//     PSN, as far as the capture proves it.
//   - extra-nak: a second NAK for a gap not yet repaired.
//   - ack-regress: an ACK behind an earlier ACK of the same connection.
//   - agg-sum: a NetReduce result that is not the rank-order sum of the
//     contributions seen at the switch; for a multi-rack ring (its
//     switch-to-switch partials seen), the tree-order sum: each leaf's
//     ranks in rank order, then the leaves' partials in child order.
//     Links that carry those frames are kept out of the stream rules:
//     a connection's packets cross them only as re-sent results.
//   - packed: a WRITE or SEND marked as carrying a compressed payload
//     (DSCP 10, INCEPTIONN's ToS 0x28) whose good-ICRC payload does not
//     unpack (frames/inceptionn's packed form).
//
// Where a single-interface capture was taken (at the requester, at the
// responder, mid-path) is inferred per connection from the evidence
// unless given, several QPs between two hosts pair by their PSN spaces,
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
