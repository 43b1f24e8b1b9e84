// Package faults will hold the fault stages attached to a link direction
// (netem-style loss, Gilbert-Elliott bursts, reorder, duplicate, corrupt,
// delay) and deterministic events matched on port, direction, class, QP,
// PSN and nth frame, with the textual fault-spec parser (issue 4). Nothing
// is implemented here yet.
package faults
