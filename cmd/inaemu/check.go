package main

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/inaemu/inaemu/capcheck"
	"github.com/inaemu/inaemu/emu/tensor"
)

// pairFlags collects repeated --pair values.
type pairFlags []capcheck.QPPair

func (p *pairFlags) String() string {
	s := make([]string, len(*p))
	for i, x := range *p {
		s[i] = x.String()
	}
	return strings.Join(s, " ")
}

func (p *pairFlags) Set(v string) error {
	x, err := capcheck.ParseQPPair(v)
	if err != nil {
		return err
	}
	*p = append(*p, x)
	return nil
}

func runCheck(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("check", "FILE [--json] [--pair SRC,DST,REQQPN=RESPQPN]... [--dtype f32|i32|f16] [--vantage auto|sender|receiver|tap] [--in-flight D]", stdout, stderr)
	asJSON := fs.Bool("json", false, "print one JSON object (conforms, frames, roce_frames, bad_icrc, malformed, ghosts, vantage_points, connections, agg_checked, agg_unchecked, agg_forwarded, retransmission_latency, nak_generation_latency, nak_response_latency, streams, violations[{rule,frame,qp,psn,detail}])")
	var pairs pairFlags
	fs.Var(&pairs, "pair", "pair a request stream with its response stream (`SRC,DST,REQQPN=RESPQPN`): requests SRC→DST with destination QPN REQQPN are answered by ACKs DST→SRC with destination QPN RESPQPN, e.g. 10.0.0.1,10.0.0.2,0x12=0x11 (repeatable; overrides automatic pairing)")
	dtype := fs.String("dtype", "f32", "element `TYPE` of NetReduce payloads for the agg-sum rule: f32, i32 or f16")
	vantage := fs.String("vantage", "auto", "`WHERE` a single-interface capture (a pcap file, a mirror port, tcpdump on one host) was taken: sender (at the requester), receiver (at the responder), tap (anywhere on the path) or auto (inferred per connection from the evidence); named link directions say it themselves")
	linkTaps := fs.Bool("link-taps", false, "every interface is the link of one host (a capture per host link): agg-sum tells directions apart by the host's MAC; interfaces named PREFIX-brN (the TAP backend's bridges) are taken so without it")
	inFlight := fs.Duration("in-flight", capcheck.DefaultInFlight, "how long frames may be on the way between the capture point and a requester, both ways: psn-order lets a requester act on responses captured within this window before its packet as if they had not reached it yet")
	inaTag := fs.String("ina-tag", "INA1", "the InetTag of the switch's INA headers: four ASCII characters or a 32-bit number (0x494E4131 is inaemu's INA1)")
	pos, err := fs.parse(args)
	if err != nil {
		return flagExit(err)
	}
	if len(pos) != 1 {
		fs.usageError("need exactly one capture file, got %d arguments", len(pos))
		return exitUsage
	}
	dt, err := tensor.ParseDType(*dtype)
	if err != nil {
		fs.usageError("--dtype: %v", err)
		return exitUsage
	}
	vt, err := capcheck.ParseVantage(*vantage)
	if err != nil {
		fs.usageError("--vantage: %v", err)
		return exitUsage
	}
	if *inFlight < 0 {
		fs.usageError("--in-flight %v: want a duration of 0 or more", *inFlight)
		return exitUsage
	}
	tag, err := parseINATag(*inaTag)
	if err != nil {
		fs.usageError("--ina-tag %q: %v", *inaTag, err)
		return exitUsage
	}
	w := *inFlight
	if w == 0 {
		w = -1 // CheckOptions: 0 is the default, negative is no window
	}
	rep, err := capcheck.CheckFile(pos[0], capcheck.CheckOptions{Pairs: pairs, DType: dt, Vantage: vt, InFlight: w, LinkTaps: *linkTaps, INATag: tag})
	if err != nil {
		fmt.Fprintf(stderr, "inaemu check: %v\n", err)
		return exitUsage
	}
	// Nothing to judge is not a capture that conforms.
	switch {
	case rep.Frames == 0:
		fmt.Fprintf(stderr, "inaemu check: %s: the capture has no frames: nothing to check\n", pos[0])
		return exitUsage
	case rep.RoCEFrames == 0:
		fmt.Fprintf(stderr, "inaemu check: %s: none of its %d frames is RoCE: nothing to check\n", pos[0], rep.Frames)
		return exitUsage
	}
	if *asJSON {
		if err := json.NewEncoder(stdout).Encode(rep); err != nil {
			fmt.Fprintf(stderr, "inaemu check: %v\n", err)
			return exitUsage
		}
	} else if err := rep.WriteText(stdout); err != nil {
		fmt.Fprintf(stderr, "inaemu check: %v\n", err)
		return exitUsage
	}
	if !rep.Conforms {
		return exitFail
	}
	return exitOK
}

// parseINATag reads an InetTag: four ASCII characters ("INA1") or a
// number ("0x494E4131", "1229869361").
func parseINATag(s string) (uint32, error) {
	if v, err := strconv.ParseUint(s, 0, 32); err == nil {
		if v == 0 {
			return 0, fmt.Errorf("the tag must not be 0")
		}
		return uint32(v), nil
	}
	if len(s) == 4 {
		return binary.BigEndian.Uint32([]byte(s)), nil
	}
	return 0, fmt.Errorf("want four ASCII characters (INA1) or a 32-bit number (0x494E4131)")
}
