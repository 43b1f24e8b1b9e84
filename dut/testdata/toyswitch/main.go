// Command toyswitch is a small NetReduce-compatible aggregating switch on
// TAP ports, written independently of inaemu's own accelerator (it
// imports nothing of inaemu) to serve as a device under test for
// inaemu's conformance suites. It takes the flag string of
// `inaemu switch --tap P` and faces inaemu's hosts (`inaemu host`) the
// same way: port r (the persistent TAP P-sw<r>) faces rank r's host.
//
// What it implements:
//   - L2 forwarding: rank r's host MAC (02:1a:e0:00:(r+1)>>8:(r+1)) is
//     behind port r; other unicast sources are learned; broadcast,
//     multicast and unknown destinations are flooded to every other port
//     (inaemu's hosts meet through flooded gratuitous ARPs before they
//     start). --mode ring does only this.
//   - --mode netreduce: one ring, RingID 0, of H ranks. Connection r is
//     rank r's RDMA WRITEs to rank r+1 (source and destination address as
//     inaemu's hosts derive them for --transport, any destination QPN,
//     learned from the first INA packet), and must enter on port r. Every
//     frame of a connection has its ICRC verified before anything else;
//     bad ones are dropped. A packet is placed by its PSN: the first
//     packet of a message (WRITE FIRST/ONLY, starting with the 8-byte INA
//     header "INA1", RingID, MsgID, MsgLen, Rank) anchors the connection's
//     message count, and every message but the last has exactly --msg-len
//     packets, so the PSN distance from the newest message start gives
//     message and offset. Packets of a message whose first packet was not
//     seen yet are dropped (go-back-N resends them after the first). A
//     slot (message, offset) stores each rank's latest frame and a
//     bitmap; when every rank is in, the sum is formed in rank order
//     (((x0+x1)+x2)+...; f16 adds in binary32 and rounds to binary16 after
//     each step, as inaemu's hosts compute the expected result) and each
//     rank's stored frame goes back out with the sum in place of its data
//     and a fresh ICRC, routed by its destination MAC to the receiver.
//     A gradient packet that meets a completed slot (a retransmission or
//     a duplicate) is answered with its own frame carrying the sum, so a
//     lost result is repaired by the sender's go-back-N.
//   - Release: 2N rows of --msg-len slots, row m mod 2N for message m.
//     --release safe (inaemu's default): message m's row is reused (for
//     m+2N) once every rank sent a first packet of message m+N, i.e. every
//     receiver holds m; a later packet of a released message is forwarded
//     unchanged (its receiver re-ACKs and discards it); a packet 2N or
//     more messages past the release point is dropped. --release paper:
//     NetReduce §3.1 as written, a packet of message m clears slot
//     ((m+N) mod 2N, offset) and slots are addressed by index alone (fine
//     without faults, not safe against late retransmissions).
//   - --dtype f32, i32 (wrapping) and f16; --transport v2-ipv4, v2-ipv6
//     and v1; --window 1..32, --msg-len 1..255, --mtu 256..4096,
//     --workers 2..64.
//   - --bug double-add: completion counts packets instead of keeping a
//     per-rank bitmap, and a rank's contributions accumulate, so a
//     duplicate or retransmitted gradient packet reaching an incomplete
//     slot is added twice (and may complete it without a rank).
//     --bug stale-icrc: results (and re-sent results) keep the ICRC of the
//     gradient frame they were built from, which no longer matches.
//     --bug wrong-port: a result for the host behind port p leaves by port
//     (p+1) mod H, whose host drops it (not its MAC).
//     --bug drop-nak: the switch forwards ACKs but swallows NAKs (a filter
//     that lets only the acknowledgements it expects through); the hosts
//     still recover, by timeout, and every result comes out right.
//     --bug late-sum: a late packet of a released message (safe rule) is
//     answered with the sum its slot holds now, a newer message's,
//     instead of going on unchanged: a wrong sum in an old PSN, which
//     its receiver drops as a duplicate.
//     --bug withhold: one result per message (its first packet's, toward
//     rank m mod H's receiver) is not sent when the packet completes;
//     the sender's retransmission gets it out, from the stored sum.
//     --bug forge-ack: as the last result of a message leaves toward
//     its receiver, the switch sends the sender the ACK the receiver
//     will send for it (same PSN, syndrome and MSN, headers copied from
//     the receiver's latest ACK) before the receiver has it; the
//     receiver's own ACK is forwarded too.
//
// What it leaves out: several rings or jobs, multi-rack trees, --mode wa
// and the GPU schemes, VLAN-aware forwarding (tags are parsed past),
// congestion, queues and line rates (frames go out as they are made),
// ECN/CNPs, and any control plane: the ring is configured from the flags.
// It assumes that the first message start it sees of a connection is
// among its first 256 messages (MsgID is 8 bits), which the window
// guarantees. The remaining job flags of `inaemu switch` (--tensor,
// --seed, --pattern, --compress, --compress-rate, --bcast, --timeout,
// --retry-cnt, --nic, --max-time) are accepted and ignored; --tap is
// another name for --prefix; --duration and --json work as in inaemu.
package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/songgao/water"
)

// maxFrame is the largest frame a port reads (the TAPs have MTU 9000).
const maxFrame = 9216

type options struct {
	prefix, mode, dtype, transport, release, bug string
	workers, window, msgLen, mtu                 int
	duration                                     time.Duration
	json                                         bool
}

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

func run(args []string, stdout, stderr io.Writer) int {
	o, code := parseFlags(args, stderr)
	if code >= 0 {
		return code
	}
	cfg, err := o.resolve()
	if err != nil {
		fmt.Fprintf(stderr, "toyswitch: %v\n", err)
		return 2
	}
	s, err := openSwitch(o, cfg)
	if err != nil {
		fmt.Fprintf(stderr, "toyswitch: %v\n", err)
		return 1
	}
	return s.serve(o, stdout, stderr)
}

func parseFlags(args []string, stderr io.Writer) (*options, int) {
	o := &options{}
	fs := flag.NewFlagSet("toyswitch", flag.ContinueOnError)
	fs.StringVar(&o.prefix, "prefix", "", "run on the TAP ports `P`-sw0 .. P-sw(H-1) (required)")
	fs.StringVar(&o.prefix, "tap", "", "the same as --prefix")
	fs.IntVar(&o.workers, "workers", 8, "number of workers H (2..64)")
	fs.StringVar(&o.mode, "mode", "netreduce", "netreduce (aggregate) or ring (forward only)")
	fs.IntVar(&o.window, "window", 2, "NetReduce window N: messages in flight per worker (1..32)")
	fs.IntVar(&o.msgLen, "msg-len", 170, "packets per message (1..255)")
	fs.IntVar(&o.mtu, "mtu", 1024, "path MTU: 256, 512, 1024, 2048 or 4096")
	fs.StringVar(&o.dtype, "dtype", "f32", "element type: f32, i32 or f16")
	fs.StringVar(&o.transport, "transport", "v2-ipv4", "encapsulation: v2-ipv4, v2-ipv6 or v1")
	fs.StringVar(&o.release, "release", "safe", "aggregator release rule: safe or paper")
	fs.StringVar(&o.bug, "bug", "none", "deviate on purpose: none, double-add, stale-icrc, wrong-port, drop-nak, late-sum, withhold or forge-ack")
	fs.DurationVar(&o.duration, "duration", 0, "stop after this long (default: until SIGINT or SIGTERM)")
	fs.BoolVar(&o.json, "json", false, "on exit, print the counters as one JSON object")
	for _, name := range []string{"tensor", "seed", "pattern", "compress", "compress-rate", "bcast", "timeout", "retry-cnt", "nic", "max-time"} {
		fs.String(name, "", "accepted for inaemu's flag string, ignored")
	}
	fs.SetOutput(io.Discard) // errors are reported on one line below
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fs.SetOutput(stderr)
			fmt.Fprintln(stderr, "Usage: toyswitch --prefix P [job flags as for 'inaemu switch'] [--bug none|double-add|stale-icrc|wrong-port|drop-nak|late-sum|withhold|forge-ack]")
			fs.PrintDefaults()
			return nil, 0
		}
		fmt.Fprintf(stderr, "toyswitch: %v\n", err)
		return nil, 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "toyswitch: unexpected argument %q\n", fs.Arg(0))
		return nil, 2
	}
	return o, -1
}

// config is the resolved job.
type config struct {
	netreduce                       bool
	dtype, enc, release, bug        int
	workers, window, msgLen, mtu    int
	addr                            func(rank int) []byte
	ports                           []string
	modeText, releaseText, bugText  string
	dtypeText, transportText, names string
}

func (o *options) resolve() (*config, error) {
	c := &config{workers: o.workers, window: o.window, msgLen: o.msgLen, mtu: o.mtu,
		modeText: o.mode, releaseText: o.release, bugText: o.bug, dtypeText: o.dtype, transportText: o.transport}
	if o.prefix == "" {
		return nil, errors.New("--prefix P is required (the TAP ports P-sw0 .. P-sw(H-1))")
	}
	if strings.ContainsAny(o.prefix, "/ \t\n:") {
		return nil, fmt.Errorf("--prefix %q: want a plain interface-name prefix", o.prefix)
	}
	switch o.mode {
	case "netreduce":
		c.netreduce = true
	case "ring":
	default:
		return nil, fmt.Errorf("--mode %q: want netreduce or ring", o.mode)
	}
	switch {
	case o.workers < 2 || o.workers > 64:
		return nil, fmt.Errorf("--workers %d: want 2..64", o.workers)
	case o.window < 1 || o.window > 32:
		return nil, fmt.Errorf("--window %d: want 1..32", o.window)
	case o.msgLen < 1 || o.msgLen > 255:
		return nil, fmt.Errorf("--msg-len %d: want 1..255", o.msgLen)
	case o.mtu != 256 && o.mtu != 512 && o.mtu != 1024 && o.mtu != 2048 && o.mtu != 4096:
		return nil, fmt.Errorf("--mtu %d: want 256, 512, 1024, 2048 or 4096", o.mtu)
	}
	var ok bool
	if c.dtype, ok = map[string]int{"f32": dtF32, "i32": dtI32, "f16": dtF16}[o.dtype]; !ok {
		return nil, fmt.Errorf("--dtype %q: want f32, i32 or f16", o.dtype)
	}
	if c.enc, ok = map[string]int{"v2-ipv4": encV2v4, "v2-ipv6": encV2v6, "v1": encV1}[o.transport]; !ok {
		return nil, fmt.Errorf("--transport %q: want v2-ipv4, v2-ipv6 or v1", o.transport)
	}
	if c.release, ok = map[string]int{"safe": releaseSafe, "paper": releasePaper}[o.release]; !ok {
		return nil, fmt.Errorf("--release %q: want safe or paper", o.release)
	}
	if c.bug, ok = map[string]int{"none": bugNone, "double-add": bugDoubleAdd, "stale-icrc": bugStaleICRC, "wrong-port": bugWrongPort, "drop-nak": bugDropNAK,
		"late-sum": bugLateSum, "withhold": bugWithhold, "forge-ack": bugForgeACK}[o.bug]; !ok {
		return nil, fmt.Errorf("--bug %q: want none, double-add, stale-icrc, wrong-port, drop-nak, late-sum, withhold or forge-ack", o.bug)
	}
	enc := c.enc
	c.addr = func(r int) []byte { return hostAddr(enc, r) }
	for r := range o.workers {
		c.ports = append(c.ports, fmt.Sprintf("%s-sw%d", o.prefix, r))
	}
	c.names = c.ports[0] + ".." + c.ports[len(c.ports)-1]
	return c, nil
}

// hostMAC is rank r's host MAC: locally administered 02:1a:e0:00 and r+1
// in the last two bytes.
func hostMAC(r int) [6]byte { return [6]byte{0x02, 0x1A, 0xE0, 0x00, byte((r + 1) >> 8), byte(r + 1)} }

// hostAddr is rank r's address as its host puts it in frames: IPv4
// 10.0.x.y, IPv6 fd00::x:y, or for RoCEv1 the link-local GID fe80:: with
// the modified EUI-64 of the host MAC (x:y = r+1).
func hostAddr(enc, r int) []byte {
	hi, lo := byte((r+1)>>8), byte(r+1)
	switch enc {
	case encV2v6:
		a := make([]byte, 16)
		a[0], a[1], a[14], a[15] = 0xfd, 0x00, hi, lo
		return a
	case encV1:
		m := hostMAC(r)
		return []byte{0xfe, 0x80, 0, 0, 0, 0, 0, 0, m[0] ^ 2, m[1], m[2], 0xff, 0xfe, m[3], m[4], m[5]}
	}
	return []byte{10, 0, hi, lo}
}

// toySwitch is the switch: ports, the MAC table and the aggregator.
type toySwitch struct {
	cfg   *config
	ports []*water.Interface
	macs  map[[6]byte]int // host MACs (fixed) and learned sources
	hosts map[[6]byte]bool
	agg   *netreduce
	view  pkt
	err   error
	st    switchStats
}

type switchStats struct {
	Frames    uint64 `json:"frames"`
	Forwarded uint64 `json:"forwarded"`
	Flooded   uint64 `json:"flooded"`
	Emitted   uint64 `json:"emitted"`
}

// openSwitch opens every port; the TAPs must exist already.
func openSwitch(o *options, cfg *config) (*toySwitch, error) {
	s := &toySwitch{cfg: cfg, macs: map[[6]byte]int{}, hosts: map[[6]byte]bool{}}
	for r := range cfg.workers {
		s.macs[hostMAC(r)] = r
		s.hosts[hostMAC(r)] = true
	}
	if err := tunUsable(); err != nil {
		return nil, err
	}
	for _, name := range cfg.ports {
		if _, err := os.Stat("/sys/class/net/" + name + "/tun_flags"); err != nil {
			s.closePorts()
			if _, err2 := os.Stat("/sys/class/net/" + name); err2 == nil {
				return nil, fmt.Errorf("%s is not a TAP", name)
			}
			return nil, fmt.Errorf("no interface %s (create it with 'inaemu tap up --prefix %s --workers %d')", name, o.prefix, cfg.workers)
		}
		ifc, err := water.New(water.Config{DeviceType: water.TAP,
			PlatformSpecificParams: water.PlatformSpecificParams{Name: name, Persist: true}})
		if err != nil {
			s.closePorts()
			return nil, fmt.Errorf("open %s: %v", name, err)
		}
		s.ports = append(s.ports, ifc)
	}
	if cfg.netreduce {
		s.agg = newNetreduce(cfg.workers, cfg.window, cfg.msgLen, cfg.mtu, cfg.dtype, cfg.release, cfg.bug, cfg.addr)
		s.agg.out = s.sendResult
	}
	return s, nil
}

func tunUsable() error {
	f, err := os.OpenFile("/dev/net/tun", os.O_RDWR, 0)
	if err != nil {
		return fmt.Errorf("TAP devices need /dev/net/tun and CAP_NET_ADMIN (run as root): %v", err)
	}
	return f.Close()
}

func (s *toySwitch) closePorts() {
	for _, p := range s.ports {
		p.Close()
	}
}

// waitUp waits (up to limit) until every port is up and, in a bridge,
// forwarding.
func waitUp(names []string, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for {
		var notYet []string
		for _, n := range names {
			op, _ := os.ReadFile("/sys/class/net/" + n + "/operstate")
			br, err := os.ReadFile("/sys/class/net/" + n + "/brport/state")
			if strings.TrimSpace(string(op)) != "up" || (err == nil && strings.TrimSpace(string(br)) != "3") {
				notYet = append(notYet, n)
			}
		}
		if len(notYet) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%v not up and forwarding after %v", notYet, limit)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

type rxFrame struct {
	port int
	buf  []byte
	n    int
}

// serve runs the switch until a signal, --duration, or a port failure.
func (s *toySwitch) serve(o *options, stdout, stderr io.Writer) int {
	sigc := make(chan os.Signal, 1)
	signal.Notify(sigc, syscall.SIGINT, syscall.SIGTERM)
	const nbuf = 1024
	rx := make(chan rxFrame, nbuf)
	free := make(chan []byte, nbuf)
	for range nbuf {
		free <- make([]byte, maxFrame)
	}
	readErr := make(chan error, len(s.ports))
	for p, ifc := range s.ports {
		go func() {
			for {
				buf := <-free
				n, err := ifc.Read(buf)
				if err != nil {
					readErr <- fmt.Errorf("%s: read: %v", s.cfg.ports[p], err)
					return
				}
				rx <- rxFrame{p, buf, n}
			}
		}()
	}
	if err := waitUp(s.cfg.ports, 10*time.Second); err != nil {
		fmt.Fprintf(stderr, "toyswitch: warning: %v\n", err)
	}
	what := "forwarding only"
	if s.cfg.netreduce {
		what = fmt.Sprintf("%d workers, window %d, %d-packet messages, MTU %d, %s, %s, release %s",
			s.cfg.workers, s.cfg.window, s.cfg.msgLen, s.cfg.mtu, s.cfg.dtypeText, s.cfg.transportText, s.cfg.releaseText)
	}
	fmt.Fprintf(stderr, "toyswitch: ready on %s (%s, bug %s): %s\n", s.cfg.names, s.cfg.modeText, s.cfg.bugText, what)
	var stop <-chan time.Time
	if o.duration > 0 {
		stop = time.After(o.duration)
	}
	start := time.Now()
	for s.err == nil {
		select {
		case f := <-rx:
			s.ingress(f.port, f.buf[:f.n])
			free <- f.buf
		case err := <-readErr:
			s.err = err
		case <-sigc:
			return s.report(o, stdout, start, 0)
		case <-stop:
			return s.report(o, stdout, start, 0)
		}
	}
	fmt.Fprintf(stderr, "toyswitch: %v\n", s.err)
	return s.report(o, stdout, start, 1)
}

func (s *toySwitch) report(o *options, stdout io.Writer, start time.Time, code int) int {
	var a aggStats
	if s.agg != nil {
		a = s.agg.st
	}
	if o.json {
		_ = json.NewEncoder(stdout).Encode(struct {
			Ports  []string    `json:"ports"`
			WallNS int64       `json:"wall_ns"`
			Switch switchStats `json:"switch"`
			Agg    aggStats    `json:"aggregator"`
		}{s.cfg.ports, int64(time.Since(start)), s.st, a})
		return code
	}
	fmt.Fprintf(stdout, "toyswitch: %d frames in %v: %d forwarded, %d flooded, %d emitted; aggregator: %d packets, %d aggregations, %d results, %d re-sends, %d ICRC drops, %d first-lost, %d stale forwards, %d window drops, %d bad\n",
		s.st.Frames, time.Since(start).Round(time.Millisecond), s.st.Forwarded, s.st.Flooded, s.st.Emitted,
		a.Packets, a.Aggregations, a.Results, a.Resends, a.ICRCDrops, a.FirstLost, a.StaleForwards, a.WindowDrops, a.BadDrops)
	return code
}

// ingress handles one frame read from port.
func (s *toySwitch) ingress(port int, f []byte) {
	s.st.Frames++
	if len(f) < 14 {
		return
	}
	if src := [6]byte(f[6:12]); src[0]&1 == 0 && !s.hosts[src] {
		s.macs[src] = port // learn, but never move a host's MAC
	}
	isRoCE := parse(f, &s.view)
	if isRoCE && s.cfg.bug == bugDropNAK && s.view.opcode() == opAcknowledge && s.view.payLen >= 1 && s.view.f[s.view.pay]>>5 == 3 {
		return // the AETH's syndrome says NAK (011xxxxx): swallowed
	}
	if s.agg != nil && isRoCE && s.view.opcode() == opAcknowledge {
		s.agg.ack(&s.view)
	}
	if s.agg != nil && isRoCE && !s.agg.handle(&s.view, port) {
		return
	}
	s.forward(f, port)
}

// forward sends f by its destination MAC, or floods it; never back out
// of the port it came in by (in; -1 for frames the switch made).
func (s *toySwitch) forward(f []byte, in int) {
	if f[0]&1 == 0 {
		if p, ok := s.macs[[6]byte(f[0:6])]; ok {
			if p != in {
				s.st.Forwarded++
				s.write(p, f)
			}
			return
		}
	}
	s.st.Flooded++
	for p := range s.ports {
		if p != in {
			s.write(p, f)
		}
	}
}

// sendResult sends a frame the aggregator made: by destination MAC, or
// with skew 1 (the wrong-port bug) by the next port.
func (s *toySwitch) sendResult(f []byte, skew int) {
	s.st.Emitted++
	p, ok := s.macs[[6]byte(f[0:6])]
	if !ok {
		s.forward(f, -1)
		return
	}
	s.write((p+skew)%len(s.ports), f)
}

func (s *toySwitch) write(p int, f []byte) {
	if _, err := s.ports[p].Write(f); err != nil && s.err == nil {
		s.err = fmt.Errorf("%s: write: %v", s.cfg.ports[p], err)
	}
}
