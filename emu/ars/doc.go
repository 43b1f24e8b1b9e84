// Package ars is the AllReduce-Switch as a switch program (Liu et al.,
// "Scalable Fully Pipelined Hardware Architecture for In-Network Aggregated
// AllReduce Communication", IEEE TCSI 68(10), 2021, §III-IV): NetReduce's
// aggregation over RoCE with the FPGA's buffers. Aggregation frames are
// told by their connection's QP and PSN (the 20-byte NCCL header only in
// WRITE FIRST), their buffer index comes from the PSN through each port's
// Frame Status Buffer (4 flows × 128 frames, kept by floating pointers),
// a frame sent again whose index completed gets the stored result back,
// and results leave through a weighted round-robin output arbiter. Frames
// that are not aggregation traffic stay with the switch's pipeline (MAC
// learning, routes, flooding). docs/ars.md says what it does where the
// paper is silent.
package ars
