package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/inaemu/inaemu/frames"
	"github.com/inaemu/inaemu/internal/pcapio"
)

// decodeCommand is 'inaemu decode FILE': every frame, one line each.
func decodeCommand(stdout, stderr io.Writer) *cobra.Command {
	var asJSON bool
	c := newCommand("decode FILE", "print every frame of a pcap/pcapng capture, one line (or JSON object) each", stdout, stderr,
		func(e *cmdEnv, pos []string) int { return runDecode(e, pos[0], asJSON) })
	c.Args = oneCapture
	c.Flags().BoolVar(&asJSON, "json", false, "print one JSON object per frame (index, frame, time, interface, comments, roce, version, ip, opcode, opcode_name, dqpn, psn, ackreq, padcnt, reth, aeth, imm, ina, payload_len, icrc, icrc_ok, ...)")
	return c
}

func runDecode(e *cmdEnv, file string, asJSON bool) int {
	stdout, stderr := e.stdout, e.stderr
	r, err := pcapio.Open(file)
	if err != nil {
		fmt.Fprintf(stderr, "inaemu decode: %v\n", err)
		return exitUsage
	}
	defer r.Close()
	out := bufio.NewWriter(stdout)
	defer out.Flush()
	enc := json.NewEncoder(out)
	var t0 time.Time
	for i := 0; ; i++ {
		rec, err := r.Next()
		if err == io.EOF {
			return exitOK
		}
		var skip *pcapio.SkippedError
		// A frame that is not Ethernet (rec has no Data) is said on its own
		// line, as tshark shows a frame it cannot dissect, and reading goes on.
		if err != nil && !errors.As(err, &skip) {
			out.Flush()
			fmt.Fprintf(stderr, "inaemu decode: %v\n", err)
			return exitUsage
		}
		if i == 0 {
			t0 = rec.Info.Timestamp
		}
		d := decoded{Frame: i + 1, Time: rec.Info.Timestamp.Sub(t0).Seconds(), Comments: rec.Comments, Summary: frames.Describe(i, rec.Data)}
		if skip != nil {
			d.skipped = skip.Err.Error()
			d.Summary.FrameLen, d.Summary.Error = rec.Info.Length, "not read: "+d.skipped
		}
		if names := r.Interfaces(); rec.Info.InterfaceIndex < len(names) {
			d.Interface = names[rec.Info.InterfaceIndex]
		}
		if asJSON {
			if err := enc.Encode(&d); err != nil {
				fmt.Fprintf(stderr, "inaemu decode: %v\n", err)
				return exitUsage
			}
		} else {
			fmt.Fprintln(out, d.line())
		}
	}
}

// decoded is one frame as decode prints it: where and when it was
// captured, then what it is.
type decoded struct {
	Frame     int      `json:"frame"`               // Wireshark's frame number (1-based; index is 0-based)
	Time      float64  `json:"time"`                // seconds since the first frame (Wireshark's frame.time_relative)
	Interface string   `json:"interface,omitempty"` // the pcapng interface's name
	Comments  []string `json:"comments,omitempty"`  // pcapng packet comments (fault annotations)
	frames.Summary
	skipped string // why the reader could not read the frame as Ethernet
}

// line is the human line: Wireshark's frame number (the same number check
// reports), the time, the interface (- for pcap), the frame, and its
// comments after #.
func (d *decoded) line() string {
	iface := d.Interface
	if iface == "" {
		iface = "-"
	}
	_, rest, _ := strings.Cut(d.Summary.Line(), " ") // the index, printed first here
	if d.skipped != "" {
		rest = fmt.Sprintf("not-read len=%d: %s", d.FrameLen, d.skipped)
	}
	s := fmt.Sprintf("%d %.9f %s %s", d.Frame, d.Time, iface, rest)
	for _, c := range d.Comments {
		s += "  # " + c
	}
	return s
}
