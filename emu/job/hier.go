package job

// Hier is what a hier job (mode hier, emu/collective/hier.go) takes beyond
// the common settings: a hierarchical collective (Collective: an
// all-reduce, or one of its halves) over the dimensions of a dims
// topology, its tensor cut into Chunks chunks, each chunk's order of
// dimensions chosen by Scheduler, and the order in which a dimension
// serves the chunks ready for it by Policy (docs/themis.md, "Packet
// mode").
type Hier struct {
	// Chunks is how many equal chunks the tensor is cut into (0: 1).
	Chunks int
	// Scheduler is baseline (every chunk: RS on dim 1 .. D, then AG on
	// dim D .. 1) or themis (each chunk's order chosen greedily on the
	// dimensions' loads); "": baseline.
	Scheduler string
	// Policy is the intra-dimension order: fifo (the chunk ready first
	// goes first) or scf (smallest chunk first); "": fifo.
	Policy string
	// Collective is all-reduce, reduce-scatter (each rank ends with its
	// shard of the sum) or all-gather (each rank starts with its shard
	// and ends with every rank's); "": all-reduce. The tensor is the
	// all-reduce's and reduce-scatter's input, the all-gather's output.
	Collective string
	// LocalOrder turns schedule consistency off (the Themis paper's
	// §4.6): each rank serves each dimension by Policy among the chunks
	// ready on it in its own arrival order, instead of the service order
	// every rank shares. Ranks that disagree wait on each other for
	// ever; the run then stops, its error naming the wait cycle.
	LocalOrder bool
	// INADims are dimensions (1-based) of switches that aggregate: an
	// all-reduce's AR stage there (a chunk's RS and AG meeting on it) is
	// one NetReduce aggregation on each group's switch (emu/themis's ina
	// kind); elsewhere such a switch runs Halving-Doubling.
	INADims []int
}

// HierReport is what a hier job did per dimension of its network.
type HierReport struct {
	Chunks    int    `json:"chunks"`
	Scheduler string `json:"scheduler"`
	Policy    string `json:"policy"`
	// Collective is the collective when one was set (an all-reduce's
	// report leaves it out, as it always did).
	Collective string `json:"collective,omitempty"`
	// Schedule is each chunk's stages in the order it ran them, e.g.
	// "RS1 RS2 AG2 AG1" (dimensions numbered from 1).
	Schedule []string   `json:"schedule"`
	Dims     []HierDim  `json:"dims"`
	Links    []HierLink `json:"links"`
	// BinNS is the width of the dimensions' activity timelines.
	BinNS int64 `json:"bin_ns"`
}

// HierDim is one dimension's share of a hier job.
type HierDim struct {
	Dim       int    `json:"dim"` // from 1, as the paper numbers them
	Kind      string `json:"kind"`
	Size      int    `json:"size"`
	Algorithm string `json:"algorithm"` // ring, direct or halving-doubling
	// PayloadBytes is the RDMA payload the job's messages on the
	// dimension carried (every rank's, each message once); WireBytes the
	// frames the hosts sent on the dimension's links (headers,
	// acknowledgements and retransmissions included; every job's).
	PayloadBytes int64 `json:"payload_bytes"`
	WireBytes    int64 `json:"wire_bytes"`
	// ARUpBytes and ARDownBytes are, on an ina dimension, the tensor
	// bytes its AR stages sent up to the switches and got back summed
	// (every rank's, each once; INA headers not counted): S up and S
	// down per NPU and AR stage. ARUpBytes is part of PayloadBytes.
	ARUpBytes   int64 `json:"ar_up_bytes,omitempty"`
	ARDownBytes int64 `json:"ar_down_bytes,omitempty"`
	// Utilisation is WireBytes over what the dimension's bandwidth per
	// NPU (the Themis model's: links the algorithm sends on at once ×
	// their rate) could carry from every NPU in the job's time, in
	// percent.
	Utilisation float64 `json:"utilisation_pct"`
	// Timeline is, per bin of BinNS from the job's start, the chunks that
	// had a stage under way on the dimension at some rank (time-weighted:
	// a chunk active half the bin counts 0.5).
	Timeline []float64 `json:"timeline_chunks"`
}

// HierLink is one link direction of the job's network.
type HierLink struct {
	Name        string  `json:"name"`
	Dim         int     `json:"dim"`
	WireBytes   int64   `json:"wire_bytes"`
	Frames      int64   `json:"frames"`
	Utilisation float64 `json:"utilisation_pct"`
}
