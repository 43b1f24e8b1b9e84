package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"

	"github.com/inaemu/inaemu/emu"
	"github.com/inaemu/inaemu/emu/netreduce"
	"github.com/inaemu/inaemu/emu/tensor"
	"github.com/inaemu/inaemu/internal/pcapio"
)

func runReplay(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("replay", "FILE --through-switch --out FILE [flags]", stdout, stderr)
	through := fs.Bool("through-switch", false, "feed the capture's frames into the emulated switch offline and write what it emits")
	out := fs.String("out", "", "the capture to write (pcapng, one interface per switch port and direction)")
	tap := fs.String("tap", "", "send the frames onto a TAP interface (not in this build: use --through-switch)")
	workers := fs.Int("workers", 0, "ring size (default: the highest INA rank seen + 1)")
	window := fs.Int("window", 0, "NetReduce window N the aggregator array is sized for (default 2)")
	msgLen := fs.Int("msg-len", 0, "packets per message (default: the longest INA MsgLen seen)")
	mtu := fs.Int("mtu", 0, "path MTU (default: the smallest that holds every payload)")
	dtype := fs.String("dtype", "f32", "element type the switch adds: f32, i32 or f16")
	release := fs.String("release", "safe", "aggregator release rule: safe or paper")
	link := fs.String("link", "100G", "egress link rate")
	asJSON := fs.Bool("json", false, "print the report as one JSON object")
	pos, err := fs.parse(args)
	if err != nil {
		return flagExit(err)
	}
	switch {
	case len(pos) != 1:
		fs.usageError("need exactly one capture file, got %d arguments", len(pos))
		return exitUsage
	case *tap != "":
		fs.usageError("--tap: sending onto TAP interfaces is not in this build yet; use --through-switch --out FILE")
		return exitUsage
	case !*through || *out == "":
		fs.usageError("need --through-switch and --out FILE")
		return exitUsage
	}
	opt := emu.ReplayOptions{Workers: *workers, Window: *window, MsgLen: *msgLen, MTU: *mtu}
	if opt.DType, err = tensor.ParseDType(*dtype); err == nil {
		if opt.Release, err = netreduce.ParseRelease(*release); err == nil {
			opt.Rate, err = emu.ParseRate(*link)
		}
	}
	if err != nil {
		fs.usageError("%v", err)
		return exitUsage
	}
	recs, names, err := pcapio.ReadAllNamed(pos[0]) // pcap files have no interface names
	if err != nil {
		fmt.Fprintf(stderr, "inaemu replay: %v\n", err)
		return exitUsage
	}
	f, err := os.Create(*out)
	if err != nil {
		fmt.Fprintf(stderr, "inaemu replay: %v\n", err)
		return exitUsage
	}
	w := bufio.NewWriter(f)
	opt.Out = w
	rep, err := emu.ReplayThroughSwitch(recs, names, opt)
	if err == nil {
		err = w.Flush()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		fmt.Fprintf(stderr, "inaemu replay: %v\n", err)
		return exitUsage
	}
	if *asJSON {
		if err := json.NewEncoder(stdout).Encode(rep); err != nil {
			return exitFail
		}
		return exitOK
	}
	fmt.Fprintf(stdout, "inaemu replay: %d frames through the switch on %d ports (%d switch-output frames of the input skipped)\n", rep.Frames, rep.Ports, rep.Ignored)
	if rep.Ring != "" {
		fmt.Fprintf(stdout, "  ring      %s\n", rep.Ring)
	}
	s := rep.Switch
	fmt.Fprintf(stdout, "  switch    %d aggregations, %d result re-sends, %d ICRC drops, %d first-lost drops, %d CLT misses, %d forwarded, %d flooded\n",
		s.Aggregations, s.ResultResends, s.ICRCDrops, s.FirstLostDrops, s.CLTMisses, s.Forwarded, s.Flooded)
	fmt.Fprintf(stdout, "  output    %s: %d frames\n", *out, rep.Emitted)
	return exitOK
}
