package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/inaemu/inaemu/internal/testtool"
	"github.com/inaemu/inaemu/tap"
)

// TestDUTAndWireBadInput: nonsense --dut, --pair and fault flags are one
// line and exit 2, before anything touches an interface.
func TestDUTAndWireBadInput(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"run", "--dut", "ina"}, `--dut "ina": want tap:PREFIX`},
		{[]string{"run", "--dut", "veth:ina"}, `want tap:PREFIX`},
		{[]string{"run", "--dut", "tap:a/b"}, `plain interface-name prefix`},
		{[]string{"run", "--dut-cmd", "true"}, `--dut-cmd: only with --dut tap:PREFIX`},
		{[]string{"run", "--dut", "tap:ina", "--dut-ready", "("}, `--dut-ready "("`},
		{[]string{"run", "--dut", "tap:ina", "--backend", "tap"}, `no --backend, no --prefix`},
		{[]string{"run", "--dut", "tap:ina", "--topology", "star:hosts=4"}, `--topology: a device under test runs on the star`},
		{[]string{"conformance", "--dut", "tap:ina", "-j", "2"}, `-j 2: a device under test takes one run at a time`},
		{[]string{"conformance", "--dut", "nonsense"}, `want tap:PREFIX`},
		{[]string{"wire"}, `--workers: say how many ranks to join`},
		{[]string{"wire", "--pair", "a"}, `--pair "a": want HOSTIF=DEVIF`},
		{[]string{"wire", "--pair", "a=a"}, `two different interfaces`},
		{[]string{"wire", "--pair", "a=b", "--workers", "2"}, `give it or --prefix/--workers, not both`},
		{[]string{"wire", "--workers", "0"}, `--workers 0: want 1..250`},
		{[]string{"wire", "--workers", "2", "--duration", "-1s"}, `--duration -1s`},
		{[]string{"wire", "--workers", "2", "--fault", "drop nth=x"}, `bad token "nth=x"`},
	} {
		code, _, errOut := runGuarded(c.args...)
		oneLine(t, code, errOut, "inaemu "+c.args[0], c.want)
	}
}

// TestWireBetweenProcesses needs root: inaemu switch, three inaemu hosts
// and inaemu wire, each in its own process, the wire dropping one
// gradient frame and corrupting one result; every host ends exact, the
// wire reports both faults, and its capture conforms.
func TestWireBetweenProcesses(t *testing.T) {
	testtool.Require(t, "tap", tap.Usable())
	bin := inaemuBinary(t)
	t.Cleanup(func() { tap.Down("itwp") })
	_, err := tap.Up(tap.Topology{Prefix: "itwp", Workers: 3, Wired: true})
	require.NoError(t, err)
	pcap := filepath.Join(t.TempDir(), "wire.pcapng")
	job := []string{"--workers", "3", "--tensor", "256KiB", "--seed", "5", "--max-time", "60s"}
	sw := exec.Command(bin, append([]string{"switch", "--tap", "itwp"}, job...)...)
	require.NoError(t, sw.Start())
	wire := exec.Command(bin, "wire", "--prefix", "itwp", "--workers", "3", "--seed", "4", "--json", "--pcap", pcap,
		"--fault", "drop port=1 dir=in class=data nth=3", "--fault", "corrupt port=0 dir=out class=data nth=7")
	var wireOut strings.Builder
	wire.Stdout = &wireOut
	require.NoError(t, wire.Start())
	var hosts []*exec.Cmd
	for r := range 3 {
		h := exec.Command(bin, append([]string{"host", "--tap", "itwp-h" + string(rune('0'+r)), "--rank", string(rune('0' + r))}, job...)...)
		require.NoError(t, h.Start())
		hosts = append(hosts, h)
	}
	for r, h := range hosts {
		require.NoError(t, h.Wait(), "host %d", r)
	}
	for _, p := range []*exec.Cmd{wire, sw} {
		require.NoError(t, p.Process.Signal(os.Interrupt))
		require.NoError(t, p.Wait())
	}
	require.Contains(t, wireOut.String(), `"dropped":1`)
	require.Contains(t, wireOut.String(), `"corrupted":1`)
	out, err := exec.Command(bin, "check", "--in-flight", "1s", pcap).CombinedOutput() // wall-clock capture (README)
	require.NoError(t, err, "%s", out)
	require.Contains(t, string(out), "result       conforms")
	require.Contains(t, string(out), "results equal the rank-order sum")
}
