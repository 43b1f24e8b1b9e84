// Package wireshark holds the Lua dissector for the INA header; this test
// loads it into tshark and checks what tshark shows.
package wireshark

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/inaemu/inaemu/emu"
	"github.com/inaemu/inaemu/internal/testtool"
)

func TestLuaDissectorShowsINAHeader(t *testing.T) {
	testtool.Need(t, "tshark", testtool.HaveTshark)
	const workers, msgLen, mtu = 3, 2, 1024
	fn := filepath.Join(t.TempDir(), "run.pcapng")
	f, err := os.Create(fn)
	require.NoError(t, err)
	cfg := emu.DefaultConfig()
	cfg.Workers, cfg.MsgLen, cfg.MTU, cfg.TensorBytes, cfg.Seed, cfg.Capture = workers, msgLen, mtu, 5000, 1, f
	res, err := emu.Run(cfg)
	require.NoError(t, err)
	require.NoError(t, f.Close())
	require.True(t, res.Exact)

	out, errOut, err := testtool.Run(t, "tshark", "-X", "lua_script:inaemu.lua", "-r", fn, "-T", "fields", "-E", "separator=|",
		"-e", "frame.interface_name", "-e", "infiniband.bth.opcode", "-e", "ina.tag", "-e", "ina.ring", "-e", "ina.msg",
		"-e", "ina.msglen", "-e", "ina.rank", "-e", "ina.data_len", "-e", "_ws.col.Info")
	require.NoError(t, err, errOut)
	require.NotContains(t, errOut, "Lua: Error")

	// 5000 bytes in messages of 2×1024-8 = 2040 bytes: messages 0, 1 (two
	// packets each) and 2 (920 bytes, one packet: WRITE ONLY WITH IMM).
	wantLen := []int{2, 2, 1}
	wantData := []int{1016, 1016, 920}
	seen := map[string]int{}
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		c := strings.Split(l, "|")
		require.Len(t, c, 9, l)
		iface, op := c[0], c[1]
		if op != "6" && op != "11" { // WRITE FIRST, WRITE ONLY WITH IMMEDIATE
			require.Empty(t, c[2], "only first packets carry the header: %q", l)
			continue
		}
		var port int
		var dir string
		_, err := fmt.Sscanf(strings.Replace(iface, "-", " ", 1), "port%d %s", &port, &dir)
		require.NoError(t, err, iface)
		rank := port // into the switch: the sender's own header
		if dir == "out" {
			rank = (port + workers - 1) % workers // a result keeps its connection's header: the predecessor's
		}
		msg, _ := strconv.Atoi(c[4])
		require.Equal(t, "0x494e4131", c[2], l)
		require.Equal(t, "0", c[3], l)
		require.Less(t, msg, 3, l)
		require.Equal(t, strconv.Itoa(wantLen[msg]), c[5], l)
		require.Equal(t, strconv.Itoa(rank), c[6], l)
		require.Equal(t, strconv.Itoa(wantData[msg]), c[7], l)
		require.Contains(t, c[8], fmt.Sprintf("[INA ring=0 msg=%d len=%d rank=%d]", msg, wantLen[msg], rank), l)
		seen[dir]++
	}
	require.Equal(t, workers*3, seen["in"], "every worker's three first packets into the switch")
	require.Equal(t, workers*3, seen["out"], "and their results")
}
