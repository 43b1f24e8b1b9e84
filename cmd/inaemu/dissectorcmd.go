package main

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/inaemu/inaemu/contrib/wireshark"
)

// dissectorCommand is 'inaemu dissector': the Lua dissector of the INA
// headers, printed or installed where Wireshark and tshark load it on
// every start, so that it works from any directory.
func dissectorCommand(stdout, stderr io.Writer) *cobra.Command {
	var install bool
	var dir string
	c := newCommand("dissector", "print the Wireshark Lua dissector of the INA headers, or install it (--install)", stdout, stderr,
		func(e *cmdEnv, _ []string) int { return runDissector(e, install, dir) })
	c.Args = noArgs
	c.Long = `Wireshark's own InfiniBand dissector decodes RoCE's BTH, RETH, AETH, ImmDt and the atomic headers;
this Lua dissector adds what is inaemu's: NetReduce's INA header at the start of RDMA WRITE
FIRST/ONLY payloads (filter ina), multi-rack NetReduce's switch-to-switch frames (ina.tree) and
INCEPTIONN's packed payloads.

An AllReduce-Switch capture (--switch-program ars) puts 20 bytes in front of the data: the INA
header and 12 reserved zero bytes (ina.reserved). The preference ina.header_len says which:
auto (the default: 20 when those 12 bytes are zero and the data after them is not), 8 or 20;
set it in Edit > Preferences > Protocols > INA or with tshark -o ina.header_len:20 when a
tensor of zeros leaves auto in doubt.

Without flags it prints the dissector (inaemu dissector > inaemu.lua; then
wireshark -X lua_script:inaemu.lua FILE). With --install it writes inaemu.lua into Wireshark's
personal Lua plugins folder, where Wireshark and tshark load it on every start: the folder
tshark -G folders names ("Personal Lua Plugins"), else ~/.local/lib/wireshark/plugins; --dir
names another. It prints the path it wrote.`
	f := c.Flags()
	f.BoolVar(&install, "install", false, "write the dissector into Wireshark's personal Lua plugins folder and print its path")
	f.StringVar(&dir, "dir", "", "with --install: the folder to write it into instead")
	return c
}

func runDissector(e *cmdEnv, install bool, dir string) int {
	if dir != "" && !install {
		e.usageError("--dir %s: names where --install writes; give --install too", dir)
		return exitUsage
	}
	if !install {
		if _, err := e.stdout.Write(wireshark.Lua); err != nil {
			return ioError(e.stderr, e.name, "stdout", err)
		}
		return exitOK
	}
	if dir == "" {
		var err error
		if dir, err = luaPluginDir(); err != nil {
			fmt.Fprintf(e.stderr, "inaemu %s: %v; name a folder with --dir\n", e.name, err)
			return exitUsage
		}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return ioError(e.stderr, e.name, dir, err)
	}
	path := filepath.Join(dir, wireshark.FileName)
	if ioErr, _ := writeFile(path, func(w io.Writer) error { _, err := w.Write(wireshark.Lua); return err }); ioErr != nil {
		return ioError(e.stderr, e.name, path, ioErr)
	}
	fmt.Fprintf(e.stdout, "%s\n", path)
	return exitOK
}

// luaPluginDir is Wireshark's personal Lua plugins folder: what tshark
// says it is, or, without tshark, the folder Wireshark 2.6 and later use
// on Linux and macOS (~/.local/lib/wireshark/plugins; Wireshark's user's
// guide, "Plugin folders").
func luaPluginDir() (string, error) {
	if tshark, err := exec.LookPath("tshark"); err == nil {
		out, err := exec.Command(tshark, "-G", "folders").Output()
		if err == nil {
			for _, l := range strings.Split(string(out), "\n") {
				if k, v, ok := strings.Cut(l, ":"); ok && strings.TrimSpace(k) == "Personal Lua Plugins" {
					if v = strings.TrimSpace(v); v != "" {
						return v, nil
					}
				}
			}
		}
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("no home folder to install into (%v)", err)
	}
	return filepath.Join(home, ".local", "lib", "wireshark", "plugins"), nil
}
