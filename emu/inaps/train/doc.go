// Package train models the training loop of one worker of a data-parallel
// job the way ESA's evaluation does: a model of layers cut into tensor
// partitions, pushed to the network in a send order with a priority, and
// a forward compute per layer that waits for that layer's aggregated
// results. It is pure logic on an injected clock: the transport (what
// sends a partition's fragments and reports when every result is in) is
// the caller's, behind Host.
//
// Sources, all public:
//
//   - ESA: "Efficient Data-Plane Memory Scheduling for In-Network
//     Aggregation" (Wang et al.), §5.4 and Table 1 for the priority
//     P_j(l) = (1/T_j) × (L_j/l) × (Comm_j/Comp_j) with T_j the job's
//     remaining time (estimated, when unknown, from the service it has
//     attained), L_j its layers, l the gradients' layer and Comm_j/Comp_j
//     measured from the previous iteration; §5.1 for the 8-bit fixed-point
//     priority field; §7.2.1 for the simulated models (two layers of equal
//     size, each evenly divided into two tensor partitions; DNN A 4 MB a
//     partition and 0.32 ms of compute a layer, comm:comp 2:1; DNN B 2 MB
//     and 0.64 ms, 1:2), the send order "the first tensor partition of the
//     second layer is transmitted first, followed by the first layer, and
//     finally the second tensor partition of the second layer", the overlap
//     rule (layer-1 compute starts when all layer-1 results are in; layer-2
//     compute waits for the end of layer-1 compute and all layer-2
//     results), T_j estimated as "the remaining communication plus the
//     computation time", and a send jitter U(0, 300 µs) for compute-speed
//     variance.
//   - SwitchML (Sapio et al., NSDI'21), github.com/p4lang/p4app-switchML,
//     dev_root/benchmarks/dnn_benchmark: the model CSV (header layer_index,
//     numel, forward_pass_ns, backward_pass_ns; one row a layer), and its
//     loop: a layer's forward pass waits for that layer's all-reduce, and
//     the backward pass runs layers last to first, each launching its
//     layer's all-reduce when its backward time has passed.
//
// What is inaemu's own (the papers leave it open): the priority's linear
// fixed point q = min(255, max(1, round(P × S))) with P in ms⁻¹ and S = 32
// by default (linear so that a switch's ">> 1" still halves it; 0 stays
// reserved for "empty" and for reminders), computed once a push (a tensor
// partition), not once a packet; the ESA send order for more than two
// layers (first partition of the last layer, then layers 1 … L−1, then the
// last layer's other partitions); the optional CSV columns partitions and
// comm_comp; and the JCT and utilisation of stats.go.
package train
