package collective

import (
	"fmt"
	"github.com/inaemu/inaemu/emu/job"
	"time"

	"github.com/inaemu/inaemu/emu/topo"
	"github.com/inaemu/inaemu/emu/workload"
	"github.com/inaemu/inaemu/tensor"
)

// The parallel all-reduce schemes over machines with several GPUs each
// (NetReduce, ASPLOS '23, §3.4 and Appendix A). A scheme job's ranks are
// GPUs, n on each of m machines (GPU i of a machine is the i-th of its
// GPUs in the job's rank list); every GPU ends with the sum of all P =
// n×m GPUs' tensors, summed in the scheme's order:
//
//   - fr, Flat Ring: Ring-AllReduce over all P GPUs in rank order (the
//     hops between GPUs of one machine on its interconnect);
//   - pn, Parallel NetReduce: the tensor is cut into n pieces; an
//     intra-machine reduce-scatter leaves piece i at GPU i summed over
//     the machine; n NetReduce rings, ring i over GPU i of every machine,
//     sum the pieces across machines through the switch (sharing each
//     machine's NIC); an intra-machine all-gather gives every GPU all n;
//   - pr, Parallel Ring: pn with Ring-AllReduce across machines;
//   - ta, Tencent's hierarchical all-reduce: an intra-machine reduce to a
//     master (GPU 0), Ring-AllReduce over the machines' masters, and a
//     broadcast from each master to its machine.
//
// The stages run one after another, as Appendix A adds their times: the
// inter-machine jobs start when every machine has finished its reduce,
// and the broadcast or all-gather when they have all finished. Each
// inter-machine ring is a job of its own in the run (named
// "<scheme job>/ring<i>" or "<scheme job>/masters"), with its frames,
// counters and result check, taking its input from the GPUs' buffers and
// leaving its result there.
//
// The intra-machine stages (intrastage.go), and so the order of the sums:
//   - pn, pr: ring reduce-scatter (piece i starts at GPU i+1; each next
//     GPU adds its own: x_{i+1} + x_{i+2} + ... + x_i, left to right) and
//     ring all-gather, n-1 steps of one piece each (Eq. 3's stages 1 and
//     3: (n-1)(α + M/(n·B_intra)));
//   - ta (n a power of two): recursive-halving reduce-scatter then a
//     binomial gather to GPU 0, log2(n) steps each, each moving (n-1)/n of
//     the tensor; binomial scatter from GPU 0 then ring all-gather for
//     the broadcast (Eq. 2's closed form: 2α log2 n + 2(n-1)/n · M/B_intra
//     before, (log2 n + n - 1)α + 2(n-1)/n · M/B_intra after). The halving
//     pairs GPU g with g XOR n/2, then n/4, ...: piece i is the sum of
//     that tree.
//
// Across machines the sum is the inter-machine job's: a NetReduce ring's
// rank (or a multi-rack ring's tree) order, a ring's chunk order. Float
// addition is taken as commutative (a+b = b+a bit for bit, true of IEEE
// sums of non-NaN values), as the ring job already does.
const (
	FR job.Mode = "fr" // flat ring over every GPU: the ring algorithm, named as the paper does
	PN job.Mode = "pn"
	PR job.Mode = "pr"
	TA job.Mode = "ta"
)

// schemeModes are the modes that are schemes over multi-GPU machines, and
// what each runs across machines (fr runs as one ring job).
var schemeModes = map[job.Mode]job.Mode{FR: Ring, PN: NetReduce, PR: Ring, TA: Ring}

func init() {
	// fr is the ring algorithm over every GPU, reported as fr.
	job.Register(job.Algorithm{Mode: FR, Doc: "on hosts with GPUs, one ring over all of them (NetReduce's Appendix A)", OnGPUs: true, Plan: func(j job.JobConfig) ([]job.JobConfig, error) {
		j.Cfg.Mode, j.Label = Ring, FR
		return []job.JobConfig{j}, nil
	}})
	for m, doc := range map[job.Mode]string{PN: "on hosts with GPUs, parallel NetReduce rings, one per GPU index",
		PR: "on hosts with GPUs, parallel rings, one per GPU index", TA: "on hosts with GPUs, reduce to a master, a ring of masters, broadcast"} {
		job.Register(job.Algorithm{Mode: m, Doc: doc, OnGPUs: true, NeedsGPUs: true, Plan: planScheme,
			New: func(r *job.Job) (job.Collective, error) { return newSchemeJob(r, r.Group.(*scheme)), nil },
			// A scheme job's own part (its inter-machine jobs are
			// estimated as jobs): every GPU's working tensor and result,
			// and at the check one machine's tensors, the machines'
			// first-stage sums and the reference, at most 3W+2 tensors in
			// all. Its frames are its inter-machine jobs'.
			Memory: func(c job.Config, e *job.MemoryEstimate) (int64, bool) {
				e.Buffers = (3*int64(c.Workers) + 2) * c.TensorBytes
				e.Largest = c.TensorBytes
				return 0, true
			}})
	}
}

// Name is the scheme job's name.
func (s *scheme) Name() string { return s.name }

// AddStage records an inter-machine job; it tells the scheme job when it
// has finished.
func (s *scheme) AddStage(j *job.Job) func() {
	s.stages = append(s.stages, j)
	return s.job.stageDone
}

// Report adds the inter-machine jobs' frames to the scheme job's.
func (j *schemeJob) Report(jr *job.JobResult) {
	for _, st := range j.s.stages {
		k := st.Report()
		jr.FramesSent += k.FramesSent
		jr.Retransmissions += k.Retransmissions
		jr.NAKs += k.NAKs
		jr.Timeouts += k.Timeouts
	}
}

// scheme is one pn, pr or ta job: its machines and GPUs, every GPU's
// working tensor and result, and the jobs of its inter-machine stage.
type scheme struct {
	mode   job.Mode
	name   string
	dtype  tensor.DType
	hosts  []string
	gpus   [][]int // per machine, its GPUs' ranks in the scheme job, GPU i at i
	n      int     // GPUs per machine
	pieces []int   // byte bounds of the n pieces
	bytes  int     // M
	// work[g] is GPU rank g's tensor, reduced in place by the first stage;
	// res[g] its result, filled by the inter-machine job and the last
	// stage.
	work, res [][]byte
	job       *schemeJob // the scheme job's own stages
	stages    []*job.Job // its inter-machine jobs
	left      int        // inter-machine jobs not yet finished
}

// stageIO is what an inter-machine job of a scheme reads and writes: its
// rank r's input is bytes [lo, hi) of GPU rank gpus[r]'s working tensor,
// its result goes to the same bytes of that GPU's result.
type stageIO struct {
	s      *scheme
	gpus   []int
	lo, hi int
}

// IsGPUScheme reports whether m is a scheme over multi-GPU machines (fr,
// pn, pr, ta): without jobs, it runs on every GPU of the hosts.
func IsGPUScheme(m job.Mode) bool { a := job.Lookup(m); return a != nil && a.OnGPUs }

// planScheme resolves a pn, pr or ta job into the scheme job (which runs
// the intra-machine stages and checks every GPU's result) followed by its
// inter-machine jobs.
func planScheme(j job.JobConfig) ([]job.JobConfig, error) {
	cfg := j.Cfg
	bad := func(f string, a ...any) error {
		return &job.ConfigError{Err: fmt.Errorf("job %s: mode %s: "+f, append([]any{j.Name, cfg.Mode}, a...)...)}
	}
	s := &scheme{mode: cfg.Mode, name: j.Name, dtype: cfg.DType, bytes: int(cfg.TensorBytes)}
	at := map[string]int{}
	for r, name := range j.Ranks {
		host, _, ok := topo.GPUOf(name)
		if !ok {
			return nil, bad("its ranks are GPUs, n on each machine (h0:gpu0, h0:gpu1, h1:gpu0, ...): rank %d is %q", r, name)
		}
		h, seen := at[host]
		if !seen {
			h = len(s.hosts)
			at[host] = h
			s.hosts = append(s.hosts, host)
			s.gpus = append(s.gpus, nil)
		}
		s.gpus[h] = append(s.gpus[h], r)
	}
	s.n = len(s.gpus[0])
	for h, g := range s.gpus {
		if len(g) != s.n {
			return nil, bad("every machine takes the same number of GPUs: %s has %d, %s has %d", s.hosts[0], s.n, s.hosts[h], len(g))
		}
	}
	m := len(s.hosts)
	if m < 2 {
		return nil, bad("its GPUs are all on %s; the scheme runs across at least two machines", s.hosts[0])
	}
	if cfg.Mode == TA && s.n&(s.n-1) != 0 {
		return nil, bad("%d GPUs per machine: ta's reduce and broadcast (recursive halving, binomial trees) take a power of two", s.n)
	}
	sz := int64(cfg.DType.Size())
	elems := cfg.TensorBytes / sz
	if elems < int64(s.n) || cfg.Mode != PN && elems/int64(s.n) < int64(m) {
		return nil, bad("--tensor %d elements: too small to cut into %d pieces of at least %d elements (one per machine's ring rank)", elems, s.n, max(1, m))
	}
	for c := 0; c <= s.n; c++ {
		s.pieces = append(s.pieces, int(elems*int64(c)/int64(s.n)*sz))
	}
	j.Group = s
	out := []job.JobConfig{j}
	stage := func(name string, mode job.Mode, gpu, lo, hi, k int) {
		io := &stageIO{s: s, lo: lo, hi: hi}
		sj := job.JobConfig{Name: name, Cfg: cfg, Start: j.Start, Group: s, IO: io}
		sj.Cfg.Mode, sj.Cfg.Workers, sj.Cfg.TensorBytes = mode, m, int64(hi-lo)
		sj.Cfg.Seed = job.JobSeed(cfg.Seed, k+1)
		for h := range m {
			sj.Ranks = append(sj.Ranks, j.Ranks[s.gpus[h][gpu]])
			io.gpus = append(io.gpus, s.gpus[h][gpu])
		}
		out = append(out, sj)
	}
	if cfg.Mode == TA {
		stage(j.Name+"/masters", Ring, 0, 0, s.bytes, 0)
	} else {
		for i := range s.n {
			stage(fmt.Sprintf("%s/ring%d", j.Name, i), schemeModes[cfg.Mode], i, s.pieces[i], s.pieces[i+1], i)
		}
	}
	return out, nil
}

// bufSource reads a stage's input from a GPU's working tensor, front to
// back like a workload.Stream.
type bufSource struct {
	b    []byte
	at   int
	size int
}

func (s *bufSource) MoveTo(e int64) { s.at = int(e) * s.size }
func (s *bufSource) Fill(p []byte)  { s.at += copy(p, s.b[s.at:]) }

// Input is rank's input of this inter-machine job.
func (io *stageIO) Input(rank int) job.Source {
	return &bufSource{b: io.s.work[io.gpus[rank]][io.lo:io.hi], size: io.s.dtype.Size()}
}

// Output is where rank's result goes.
func (io *stageIO) Output(rank int) []byte { return io.s.res[io.gpus[rank]][io.lo:io.hi] }

// schemeChecked, when a test sets it, sees a scheme's GPUs' results (and
// may alter them) before they are checked.
var schemeChecked func(s *scheme)

// schemeJob is a scheme job's own part: the intra-machine stages and the
// check of every GPU's result against the scheme's reduction order.
type schemeJob struct {
	r        *job.Job
	s        *scheme
	running  int // machines still in the current intra-machine stage
	mismatch *job.Mismatch
}

func newSchemeJob(r *job.Job, s *scheme) *schemeJob {
	s.work, s.res = make([][]byte, len(r.Workers)), make([][]byte, len(r.Workers))
	for g, w := range r.Workers {
		s.work[g] = make([]byte, s.bytes)
		workload.NewStream(r.Cfg.DType, r.Cfg.Pattern, w.Rank, r.Cfg.Seed).Fill(s.work[g])
		s.res[g] = make([]byte, s.bytes)
		w.RecvWant = 1
	}
	s.job = &schemeJob{r: r, s: s}
	return s.job
}

// Start runs every machine's first stage; the inter-machine jobs Start
// when all have finished.
func (j *schemeJob) Start() error {
	var sched []intraXfer
	if j.s.mode == TA {
		sched = append(halvingReduceScatter(j.s.pieces), shift(binomialGather(j.s.pieces), log2(j.s.n))...)
	} else {
		sched = ringReduceScatter(j.s.pieces)
	}
	j.intra(j.s.work, sched, false, func() {
		j.s.left = len(j.s.stages)
		for _, st := range j.s.stages {
			if err := st.Begin(); err != nil {
				j.r.Err = &job.JobError{Msg: fmt.Sprintf("job %s: %v", st.Name, err)}
				return
			}
		}
	})
	return nil
}

// stageDone is told when an inter-machine job has finished: after the last,
// every machine runs its last stage.
func (j *schemeJob) stageDone() {
	if j.s.left--; j.s.left > 0 {
		return
	}
	var sched []intraXfer
	if j.s.mode == TA {
		sched = append(binomialScatter(j.s.pieces), ringAllGather(j.s.pieces, log2(j.s.n))...)
	} else {
		sched = ringAllGather(j.s.pieces, 0)
	}
	j.intra(j.s.res, sched, true, func() {})
}

// intra runs one stage on every machine, each on its GPUs' buffers from
// bufs, and calls done once every machine has finished. The last stage
// gives each GPU its result when its last transfer lands.
func (j *schemeJob) intra(bufs [][]byte, sched []intraXfer, last bool, done func()) {
	r := j.r
	j.running = len(j.s.gpus)
	for _, gpus := range j.s.gpus {
		node, _ := r.Fab.Topo.Node(r.Workers[gpus[0]].Host)
		buf := make([][]byte, len(gpus))
		busy := make([]*time.Duration, len(gpus))
		for i, g := range gpus {
			buf[i] = bufs[g]
			busy[i] = r.GPUPort(r.Workers[g])
		}
		var st *intraStage
		st = newIntraStage(r.Fab.Clock, node.Intra, j.s.dtype, buf, busy, sched, func() {
			if last {
				for i, g := range gpus {
					w := r.Workers[g]
					w.RecvDone, w.DoneAt = 1, st.at[i]
				}
			}
			if j.running--; j.running == 0 {
				done()
			}
		})
		st.start()
	}
}

// shift moves a schedule's steps k later.
func shift(xs []intraXfer, k int) []intraXfer {
	for i := range xs {
		xs[i].step += k
	}
	return xs
}

func (j *schemeJob) OnCompletion(*job.Worker) {}

// Check compares every GPU's result with the scheme's sum, made here from
// the GPUs' tensor streams in the scheme's order: the first mismatch in
// rank, then element order.
func (j *schemeJob) Check() *job.Mismatch {
	if j.mismatch != nil {
		return j.mismatch
	}
	if schemeChecked != nil {
		schemeChecked(j.s)
	}
	want := j.reference()
	for g := range j.s.res {
		if m := firstDiff(j.s.dtype, g, 0, j.s.res[g], want); m != nil {
			j.mismatch = m
			return m
		}
	}
	return nil
}

// reference is the sum every GPU must hold: per machine the first stage's
// sum of its GPUs' pieces, then the inter-machine job's order across
// machines.
func (j *schemeJob) reference() []byte {
	s, d := j.s, j.s.dtype
	m := len(s.hosts)
	x := make([][]byte, s.n) // one machine's GPUs' tensors
	for i := range x {
		x[i] = make([]byte, s.bytes)
	}
	mach := make([][]byte, m) // per machine, its first stage's sums
	for h, gpus := range s.gpus {
		for i, g := range gpus {
			workload.NewStream(d, j.r.Cfg.Pattern, g, j.r.Cfg.Seed).Fill(x[i])
		}
		mach[h] = make([]byte, s.bytes)
		for c := range s.n {
			lo, hi := s.pieces[c], s.pieces[c+1]
			out := mach[h][lo:hi]
			if s.mode == TA {
				// The halving tree: level k pairs each GPU with its
				// partner n/2^k away, each adding the other's to its own.
				t := make([][]byte, s.n)
				for g := range t {
					t[g] = append([]byte(nil), x[g][lo:hi]...)
				}
				for dd := s.n / 2; dd >= 1; dd /= 2 {
					nt := make([][]byte, s.n)
					for g := range t {
						nt[g] = append([]byte(nil), t[g]...)
						tensor.Add(d, nt[g], t[g^dd])
					}
					t = nt
				}
				copy(out, t[c])
				continue
			}
			ringSum(d, s.n, c+1, out, make([]byte, hi-lo), func(g int, buf []byte) { copy(buf, x[g][lo:hi]) })
		}
	}
	want := make([]byte, s.bytes)
	for _, st := range s.stages {
		io := st.IO.(*stageIO)
		seg := want[io.lo:io.hi]
		scratch := make([]byte, len(seg))
		switch job := st.Alg.(type) {
		case *netReduceJob:
			groupSum(d, job.groups, seg, scratch, func(h int) []byte { return mach[h][io.lo:io.hi] })
		case *ringJob: // chunk q of the job's tensor starts at rank q
			for q := range m {
				lo, hi := job.bounds[q], job.bounds[q+1]
				ringSum(d, m, q, seg[lo:hi], scratch[:hi-lo], func(h int, buf []byte) { copy(buf, mach[h][io.lo+lo:io.lo+hi]) })
			}
		}
	}
	return want
}
