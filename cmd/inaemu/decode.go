package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"

	"github.com/inaemu/inaemu/frames"
	"github.com/inaemu/inaemu/internal/pcapio"
)

func runDecode(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("decode", "FILE [--json]", stdout, stderr)
	asJSON := fs.Bool("json", false, "print one JSON object per frame (index, roce, version, ip, opcode, opcode_name, dqpn, psn, ackreq, padcnt, reth, aeth, imm, ina, payload_len, icrc, icrc_ok, ...)")
	pos, err := fs.parse(args)
	if err != nil {
		return flagExit(err)
	}
	if len(pos) != 1 {
		fs.usageError("need exactly one capture file, got %d arguments", len(pos))
		return exitUsage
	}
	r, err := pcapio.Open(pos[0])
	if err != nil {
		fmt.Fprintf(stderr, "inaemu decode: %v\n", err)
		return exitUsage
	}
	defer r.Close()
	out := bufio.NewWriter(stdout)
	defer out.Flush()
	enc := json.NewEncoder(out)
	for i := 0; ; i++ {
		rec, err := r.Next()
		if err == io.EOF {
			return exitOK
		}
		if err != nil {
			out.Flush()
			fmt.Fprintf(stderr, "inaemu decode: %v\n", err)
			return exitUsage
		}
		s := frames.Describe(i, rec.Data)
		if *asJSON {
			if err := enc.Encode(&s); err != nil {
				fmt.Fprintf(stderr, "inaemu decode: %v\n", err)
				return exitUsage
			}
		} else {
			fmt.Fprintln(out, s.Line())
		}
	}
}
