// Package emu will hold the fabric: the discrete-event scheduler (a
// roce.Clock), hosts and NICs, links with rate, delay and bounded queues,
// the L2 switch with the NetReduce aggregation accelerator, the allreduce
// jobs, pcapng capture and the TAP backend (issues 4 and 6). Nothing is
// implemented here yet.
package emu
