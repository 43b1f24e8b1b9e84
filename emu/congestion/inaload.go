package congestion

// INA beside ordinary traffic. NetReduce (Liu et al., ASPLOS '23, §2
// "network management" and §3 "Congestion Control") argues that in-network
// aggregation must share a cluster's network with ordinary traffic and that
// it needs no congestion control of its own: its hosts are RoCEv2 endpoints,
// so it "reuses the RoCEv2 congestion mechanism on NICs". This experiment
// puts an allreduce job beside an incast of ordinary RDMA WRITE flows that
// shares one of its links and measures the job's slowdown (its time with
// the background over its time alone) in the four settings a RoCE network
// is run in: lossy (drops and go-back-N), PFC, DCQCN on a lossy network,
// and PFC with DCQCN.
//
// The contended link, by topology:
//
//	star:       h4 h5 h6 h7 ──incast──▶ s0 ──port0-out──▶ h0   (h0 is rank 0 of
//	            h0..h3 (the INA job) ◀─▶ s0                     the INA job: its
//	                                                            results share the link)
//	spine-leaf: h2 h3 (leaf0) ──▶ leaf0 ──uplink──▶ spine0 ──▶ leaf1 ──▶ h6
//	            INA ranks h0 h1 (leaf0), h4 h5 (leaf1): leaf0's partial sums go up
//	            the same uplink (leaf0 → spine0), the spine's totals come down
//	            spine0 → leaf1 beside the background.
//
// A ring job (mode ring) on the same hosts is the baseline: Ring-AllReduce's
// WRITEs from h3 to h0 (star) or h1 to h4 (spine-leaf) cross the same link.

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/inaemu/inaemu/emu"
	"github.com/inaemu/inaemu/emu/fabric"
	"github.com/inaemu/inaemu/emu/topo"
)

// The settings of the network: PFC on the jobs' priority, DCQCN in every
// job's NICs with the switches marking by RED at DCQCN's parameters.
var INASettings = []INASetting{
	{Name: "lossy"},
	{Name: "pfc", PFC: true},
	{Name: "dcqcn", DCQCN: true},
	{Name: "pfc+dcqcn", PFC: true, DCQCN: true},
}

// INASetting is one way the network is run.
type INASetting struct {
	Name  string `json:"name"`
	PFC   bool   `json:"pfc"`
	DCQCN bool   `json:"dcqcn"`
}

// Flags are the `inaemu run` flags of the setting.
func (s INASetting) Flags() string {
	var f []string
	if s.PFC {
		f = append(f, "--pfc on")
	}
	if s.DCQCN {
		f = append(f, "--cc dcqcn --red "+INARED)
	}
	return strings.Join(f, " ")
}

const (
	// INADSCP is both jobs' DSCP: 26 (priority 3), the customary RoCE
	// codepoint (NVIDIA's RoCE configuration guides use DSCP 26 on
	// priority 3), so PFC "on" makes priority 3 lossless and both jobs
	// share its queue: the background competes in the INA job's class.
	INADSCP = 26
	// INARED is DCQCN's switch marking (Zhu et al., SIGCOMM '15, §5:
	// Kmin 5 KB, Kmax 200 KB, Pmax 1%).
	INARED = "5KB,200KB,1%"
	// INABuffer is each switch's shared buffer (it admits and pauses only
	// with PFC): 1 MB, the buffering the lossy settings' egress queue of
	// 1000 frames (inaemu's default, 1,078 B per full frame on the wire)
	// gives a port, so the settings differ in what a full buffer does,
	// not in how much it holds. 12 MB (Trident II) shared by its 32
	// 40G ports (or Tomahawk's 16 MB by 32 100G ports) is 375 KB to
	// 500 KB a port; an 8-port switch with 1 MB is in that range.
	INABuffer = 1_000_000
)

// INALoad is one cell of the experiment.
type INALoad struct {
	// Topology is "star" (8 hosts on one switch) or "spine-leaf" (2
	// leaves of 4 hosts, one spine, uplinks at the host links' rate).
	Topology string
	// Mode is the INA job's: emu.NetReduce, or emu.Ring as the baseline.
	Mode emu.Mode
	// Load is the background's offered load as a fraction of the
	// contended link (0: the job alone): its flows are paced so that
	// together they offer Load × the link's rate.
	Load float64
	// Duration is how long each background flow lasts at its pace (its
	// bytes are pace × Duration): longer than the job alone, so the job
	// runs against the background throughout (unless slowed beyond it).
	Duration time.Duration
	Setting  INASetting
	Tensor   int64   // per rank
	Link     float64 // every link's rate, bits/s
	Seed     uint64
}

// DefaultINALoad is the quick cell: 1 MiB per rank on 10 Gb/s links (the
// job alone takes about 0.9 ms), background flows of 4 ms.
func DefaultINALoad() INALoad {
	return INALoad{Topology: "star", Mode: emu.NetReduce, Duration: 4 * time.Millisecond,
		Tensor: 1 << 20, Link: 10e9, Seed: 1}
}

// inaHosts and bgHosts are the two jobs' ranks (the incast's sink last).
func (c INALoad) hosts() (ina, bg []string, err error) {
	switch c.Topology {
	case "star":
		return []string{"h0", "h1", "h2", "h3"}, []string{"h4", "h5", "h6", "h7", "h0"}, nil
	case "spine-leaf":
		return []string{"h0", "h1", "h4", "h5"}, []string{"h2", "h3", "h6"}, nil
	}
	return nil, nil, fmt.Errorf("topology %q: want star or spine-leaf", c.Topology)
}

// ContendedLink names the link direction the background shares with the
// INA job.
func (c INALoad) ContendedLink() string {
	if c.Topology == "star" {
		return "port0-out (s0 → h0, rank 0)"
	}
	return "leaf0 → spine0 (the uplink), then spine0 → leaf1"
}

// flowRate is each background flow's pace, bits/s.
func (c INALoad) flowRate(flows int) float64 { return c.Load * c.Link / float64(flows) }

// flowBytes is each background flow's size.
func (c INALoad) flowBytes(flows int) int64 {
	return int64(c.flowRate(flows) / 8 * c.Duration.Seconds())
}

// Config is the run of the cell.
func (c INALoad) Config() (emu.Config, error) {
	ina, bg, err := c.hosts()
	if err != nil {
		return emu.Config{}, err
	}
	if c.Load < 0 || c.Load > 1 {
		return emu.Config{}, fmt.Errorf("load %v: want 0..1", c.Load)
	}
	cfg := emu.DefaultConfig()
	cfg.Link.Rate, cfg.Link.Latency, cfg.Seed, cfg.TensorBytes = c.Link, time.Microsecond, c.Seed, c.Tensor
	l := topo.LinkParams{Rate: c.Link, Latency: time.Microsecond}
	if c.Topology == "star" {
		cfg.Topology, err = topo.Star(8, l)
	} else {
		cfg.Topology, err = topo.SpineLeaf(2, 4, 1, l, l)
	}
	if err != nil {
		return cfg, err
	}
	dscp := INADSCP
	cfg.Jobs = []emu.JobSpec{{Name: "ina", Mode: c.Mode, Ranks: ina, DSCP: &dscp}}
	if c.Load > 0 {
		flows := len(bg) - 1
		cfg.Jobs = append(cfg.Jobs, emu.JobSpec{Name: "bg", Mode: emu.Mode("traffic"), Ranks: bg, DSCP: &dscp,
			TensorBytes: c.flowBytes(flows),
			Traffic:     &emu.Traffic{Pattern: "incast", Sink: bg[len(bg)-1], Rate: c.flowRate(flows)}})
	}
	cfg.Buffer.Bytes = INABuffer
	if c.Setting.PFC {
		cfg.PFC = "on"
	}
	if c.Setting.DCQCN {
		cfg.CC = "dcqcn"
		cfg.RED = fabric.RED{Kmin: 5000, Kmax: 200000, Pmax: 0.01}
	}
	return cfg, nil
}

// ScenarioYAML is the cell's network and jobs as an `inaemu run
// --scenario` file; the setting is given by flags (INASetting.Flags) and
// the ring baseline by --mode ring (the INA job names no mode).
func (c INALoad) ScenarioYAML() (string, error) {
	ina, bg, err := c.hosts()
	if err != nil {
		return "", err
	}
	var b strings.Builder
	fmt.Fprintf(&b, "# INA beside ordinary traffic (docs/congestion.md): a NetReduce job (or --mode ring)\n")
	if c.Load == 0 {
		fmt.Fprintf(&b, "# alone, the reference of its slowdown.\n")
	} else {
		fmt.Fprintf(&b, "# beside an incast offering %s%% of the contended link %s.\n", pct(c.Load), c.ContendedLink())
	}
	fmt.Fprintf(&b, "link: %s\nlatency: 1us\nseed: %d\ntensor: %s\nswitch_buffer: 1MB\n", rate(c.Link), c.Seed, size(c.Tensor))
	if c.Topology == "star" {
		b.WriteString("topology: {kind: star, hosts: 8}\n")
	} else {
		fmt.Fprintf(&b, "topology: {kind: spine-leaf, leaves: 2, hosts_per_leaf: 4, spines: 1, uplink: %s}\n", rate(c.Link))
	}
	fmt.Fprintf(&b, "jobs:\n  - {name: ina, ranks: [%s], dscp: %d}\n", strings.Join(ina, ", "), INADSCP)
	if c.Load > 0 {
		flows := len(bg) - 1
		fmt.Fprintf(&b, "  - {name: bg, mode: traffic, ranks: [%s], traffic: incast, sink: %s, rate: %s, tensor: %dB, dscp: %d}\n",
			strings.Join(bg, ", "), bg[flows], rate(c.flowRate(flows)), c.flowBytes(flows), INADSCP)
	}
	return b.String(), nil
}

func pct(f float64) string { return strconv.FormatFloat(f*100, 'f', -1, 64) }

// rate writes bits/s as tc does (10G, 625M, 1250000000bit).
func rate(r float64) string {
	for _, u := range []struct {
		s string
		v float64
	}{{"G", 1e9}, {"M", 1e6}} {
		if x := r / u.v; x == float64(int64(x)) {
			return strconv.FormatInt(int64(x), 10) + u.s
		}
	}
	return strconv.FormatInt(int64(r), 10) + "bit"
}

func size(n int64) string {
	if n%(1<<20) == 0 {
		return strconv.FormatInt(n>>20, 10) + "MiB"
	}
	return strconv.FormatInt(n, 10) + "B"
}

// INALoadResult is a cell's run: the INA job's time with the background,
// and what the network did.
type INALoadResult struct {
	Topology string  `json:"topology"`
	Mode     string  `json:"mode"`
	Setting  string  `json:"setting"`
	Load     float64 `json:"load"`
	// Exact: every rank of both jobs holds the bit-exact result.
	Exact bool `json:"exact"`
	// INANS is the INA job's time (start to its last rank's last result).
	INANS           int64  `json:"ina_ns"`
	Timeouts        uint64 `json:"timeouts"`        // the INA job's ACK timeouts
	Retransmissions uint64 `json:"retransmissions"` // the INA job's
	Drops           uint64 `json:"drops"`           // the run's: every link's queue and every switch's buffer
	Pauses          uint64 `json:"pauses"`          // PFC frames sent, every direction
	ECNMarks        uint64 `json:"ecn_marks"`       // CE marks, every switch egress
	// INACNPs are the CNPs the INA job's ring send QPs received (its
	// reaction points' counts; NetReduce's CNPs reach the rank whose
	// frame a marked result was built from).
	INACNPs uint64 `json:"ina_cnps"`
	// BGGbps is the background's goodput (bytes over its last flow's end),
	// BGNS its time.
	BGGbps float64 `json:"bg_gbps,omitempty"`
	BGNS   int64   `json:"bg_ns,omitempty"`
}

// Run runs the cell. A run that fails (a job error, not exact) returns
// its result with the error.
func (c INALoad) Run() (INALoadResult, error) {
	cfg, err := c.Config()
	if err != nil {
		return INALoadResult{}, err
	}
	return c.run(cfg)
}

func (c INALoad) run(cfg emu.Config) (INALoadResult, error) {
	out := INALoadResult{Topology: c.Topology, Mode: string(c.Mode), Setting: c.Setting.Name, Load: c.Load}
	res, err := emu.Run(cfg)
	if res == nil {
		return out, err
	}
	out.Exact = res.Exact
	out.Drops = res.QueueDrops + pfcBufferDrops(res.Switch.Buffer)
	for _, p := range res.PFC {
		out.Pauses += p.PausesSent
		out.ECNMarks += p.ECNMarks
	}
	for _, j := range res.Jobs {
		if j.Name == "bg" {
			out.BGNS = j.VirtualNS
			out.BGGbps = j.AlgBWGbps
			continue
		}
		out.INANS, out.Timeouts, out.Retransmissions = j.VirtualNS, j.Timeouts, j.Retransmissions
		if j.DCQCN != nil {
			for _, q := range j.DCQCN.QPs {
				if q.QPN == emu.SendQPN {
					out.INACNPs += q.CNPs
				}
			}
		}
	}
	if err == nil && !res.Exact {
		err = errors.New("not exact")
	}
	return out, err
}
