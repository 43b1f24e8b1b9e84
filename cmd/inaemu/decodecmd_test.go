package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/inaemu/inaemu/internal/testtool"
	"github.com/inaemu/inaemu/internal/testvec"
)

func runCLI(args ...string) (code int, stdout, stderr string) {
	var o, e bytes.Buffer
	code = run(args, &o, &e)
	return code, o.String(), e.String()
}

// decodedLine is the subset of `inaemu decode --json` the issue fixes.
type decodedLine struct {
	Index      int     `json:"index"`
	RoCE       bool    `json:"roce"`
	Version    *string `json:"version"`
	IP         *int    `json:"ip"`
	Opcode     *int    `json:"opcode"`
	OpcodeName *string `json:"opcode_name"`
	DQPN       *uint32 `json:"dqpn"`
	PSN        *uint32 `json:"psn"`
	AckReq     *bool   `json:"ackreq"`
	PadCnt     *int    `json:"padcnt"`
	RETH       *struct {
		VA   uint64 `json:"va"`
		RKey uint32 `json:"rkey"`
		DLen uint32 `json:"dlen"`
	} `json:"reth"`
	AETH *struct {
		Syndrome uint8  `json:"syndrome"`
		MSN      uint32 `json:"msn"`
	} `json:"aeth"`
	Imm        *uint32         `json:"imm"`
	INA        json.RawMessage `json:"ina"`
	PayloadLen *int            `json:"payload_len"`
	ICRC       *string         `json:"icrc"`
	ICRCOK     *bool           `json:"icrc_ok"`
}

// TestDecodeJSONVectors runs `inaemu decode --json` on every test-vector
// capture in testdata/vectors and compares each line with the manifest.
func TestDecodeJSONVectors(t *testing.T) {
	vecs, err := testvec.Load()
	require.NoError(t, err)
	byFile := map[string][]testvec.Frame{}
	for _, f := range vecs {
		byFile[f.File] = append(byFile[f.File], f)
	}
	checked := 0
	for file, want := range byFile {
		code, out, errOut := runCLI("decode", filepath.Join(testvec.Dir(), file), "--json")
		require.Equal(t, 0, code, errOut)
		var got []decodedLine
		sc := bufio.NewScanner(strings.NewReader(out))
		for sc.Scan() {
			var d decodedLine
			require.NoError(t, json.Unmarshal(sc.Bytes(), &d), sc.Text())
			got = append(got, d)
		}
		require.Len(t, got, len(want), file)
		for _, w := range want {
			d := got[w.FrameIndex]
			name := fmt.Sprintf("%s#%d", file, w.FrameIndex)
			assert.Equal(t, w.FrameIndex, d.Index, name)
			assert.True(t, d.RoCE, name)
			wantVer, wantIP := "v2", 4
			switch w.Transport {
			case "v1":
				wantVer = "v1"
				assert.Nil(t, d.IP, name)
			case "v2-ipv6":
				wantIP = 6
			}
			assert.Equal(t, wantVer, *d.Version, name)
			if w.Transport != "v1" {
				assert.Equal(t, wantIP, *d.IP, name)
			}
			assert.Equal(t, int(w.BTH.Opcode), *d.Opcode, name)
			assert.Equal(t, w.BTH.Name, *d.OpcodeName, name)
			assert.Equal(t, w.BTH.DestQP, *d.DQPN, name)
			assert.Equal(t, w.BTH.PSN, *d.PSN, name)
			assert.Equal(t, w.BTH.AckReq == 1, *d.AckReq, name)
			assert.Equal(t, w.BTH.PadCount, *d.PadCnt, name)
			if w.RETH == nil {
				assert.Nil(t, d.RETH, name)
			} else if assert.NotNil(t, d.RETH, name) {
				assert.Equal(t, w.RETH.VA, d.RETH.VA, name)
				assert.Equal(t, w.RETH.RKey, d.RETH.RKey, name)
				assert.Equal(t, w.RETH.DMALen, d.RETH.DLen, name)
			}
			if w.AETH == nil {
				assert.Nil(t, d.AETH, name)
			} else if assert.NotNil(t, d.AETH, name) {
				assert.Equal(t, w.AETH.Syndrome, d.AETH.Syndrome, name)
				assert.Equal(t, w.AETH.MSN, d.AETH.MSN, name)
			}
			assert.Equal(t, w.ImmDt, d.Imm, name)
			assert.Equal(t, "null", string(d.INA), name)
			assert.Equal(t, w.PayloadLen, *d.PayloadLen, name)
			assert.Equal(t, w.ICRCWire, *d.ICRC, name)
			assert.Equal(t, w.ICRCValid, *d.ICRCOK, name)
			checked++
		}
	}
	assert.Equal(t, 70, checked)
}

func TestDecodeErrors(t *testing.T) {
	dir := t.TempDir()
	good, err := os.ReadFile(filepath.Join(testvec.Dir(), "rc_opcodes_v2_ipv4.pcap"))
	require.NoError(t, err)
	trunc := filepath.Join(dir, "trunc.pcap")
	require.NoError(t, os.WriteFile(trunc, good[:500], 0o644))
	junk := filepath.Join(dir, "junk.pcap")
	require.NoError(t, os.WriteFile(junk, []byte("this is not a capture at all"), 0o644))
	empty := filepath.Join(dir, "empty.pcap")
	require.NoError(t, os.WriteFile(empty, nil, 0o644))

	for _, c := range []struct {
		name    string
		args    []string
		code    int
		stderr  string
		stdoutN int // lines expected on stdout
	}{
		{"no file", []string{"decode"}, 2, "need exactly one capture file", 0},
		{"two files", []string{"decode", trunc, junk}, 2, "need exactly one capture file", 0},
		{"bad flag", []string{"decode", "--bogus", trunc}, 2, "unknown flag: --bogus", 0},
		{"missing", []string{"decode", filepath.Join(dir, "nope.pcap")}, 2, "no such file", 0},
		{"junk", []string{"decode", junk}, 2, "not a pcap or pcapng file", 0},
		{"empty", []string{"decode", empty}, 2, "too short to be a capture", 0},
		{"truncated", []string{"decode", "--json", trunc}, 2, "trunc.pcap: frame 3: truncated record at byte 208 (header says 314 bytes, 276 present)", 2},
		{"unknown command", []string{"decodez"}, 2, "unknown command", 0},
		{"help", []string{"decode", "--help"}, 0, "", -1},
	} {
		t.Run(c.name, func(t *testing.T) {
			code, out, errOut := runCLI(c.args...)
			assert.Equal(t, c.code, code)
			assert.Contains(t, errOut, c.stderr)
			if c.code != 0 {
				assert.Equal(t, 1, strings.Count(errOut, "\n"), "one-line reason:\n%s", errOut)
			}
			if c.stdoutN >= 0 {
				assert.Equal(t, c.stdoutN, strings.Count(out, "\n"), out)
			} else {
				assert.Contains(t, out, "Usage: inaemu decode")
			}
		})
	}
}

// decode's frame numbers, interfaces, relative times and packet comments
// are what tshark reads from the same capture (frame.number,
// frame.interface_name, frame.time_relative, frame.comment), and the
// human line carries them too.
func TestDecodeWhereAndWhenAgreeWithTshark(t *testing.T) {
	testtool.Need(t, "tshark", testtool.HaveTshark)
	pcap := filepath.Join(t.TempDir(), "run.pcapng")
	code, _, errOut := runCLI("run", "--workers", "2", "--tensor", "8KiB", "--msg-len", "2", "--seed", "1",
		"--fault", "drop port=0 dir=in class=data nth=2", "--pcap", pcap)
	require.Equal(t, 0, code, errOut)
	code, out, errOut := runCLI("decode", pcap, "--json")
	require.Equal(t, 0, code, errOut)
	type row struct {
		Frame     int      `json:"frame"`
		Index     int      `json:"index"`
		Time      float64  `json:"time"`
		Interface string   `json:"interface"`
		Comments  []string `json:"comments"`
	}
	var got []row
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		var r row
		require.NoError(t, json.Unmarshal([]byte(l), &r))
		got = append(got, r)
	}
	ts, tsErr, err := testtool.Run(t, "tshark", "-r", pcap, "-T", "fields", "-E", "separator=|",
		"-e", "frame.number", "-e", "frame.interface_name", "-e", "frame.time_relative", "-e", "frame.comment")
	require.NoError(t, err, tsErr)
	lines := strings.Split(strings.TrimSpace(ts), "\n")
	require.Len(t, got, len(lines))
	comments := 0
	for i, l := range lines {
		f := strings.Split(l, "|")
		require.Len(t, f, 4, l)
		assert.Equal(t, f[0], strconv.Itoa(got[i].Frame), "frame number")
		assert.Equal(t, i, got[i].Index)
		assert.Equal(t, f[1], got[i].Interface)
		rel, err := strconv.ParseFloat(f[2], 64)
		require.NoError(t, err)
		assert.InDelta(t, rel, got[i].Time, 1e-9)
		// tshark shows the line feed that ends each comment (written for
		// scapy 2.5, which keeps a comment only up to one) as \n.
		assert.Equal(t, strings.TrimSuffix(f[3], `\n`), strings.Join(got[i].Comments, ","))
		comments += len(got[i].Comments)
	}
	assert.Equal(t, 1, comments, "the dropped frame's annotation")
	code, out, _ = runCLI("decode", pcap)
	require.Equal(t, 0, code)
	assert.Contains(t, out, `port0-in v2-ipv4 10.0.0.1 > 10.0.0.2 RC_RDMA_WRITE_LAST_WITH_IMMEDIATE`)
	assert.Contains(t, out, `  # inaemu: fault=drop spec="drop port=0 dir=in class=data nth=2" (not delivered)`)
	// Each human line starts with tshark's frame number and interface,
	// the number check's violation lines give.
	human := strings.Split(strings.TrimSpace(out), "\n")
	require.Len(t, human, len(lines))
	for i, l := range lines {
		f := strings.Split(l, "|")
		h := strings.Fields(human[i])
		require.GreaterOrEqual(t, len(h), 3, human[i])
		assert.Equal(t, f[0], h[0], "frame number of line %d", i)
		assert.Equal(t, f[1], h[2], "interface of line %d", i)
	}
}
