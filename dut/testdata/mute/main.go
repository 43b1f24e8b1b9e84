// Command mute is a device under test that stops forwarding: it holds
// its TAP ports PREFIX-sw0..N-1 (so they are up), says it is ready, and
// then reads every frame and sends nothing, until it is stopped. The
// stall detector's tests run it (a dead switch, or one whose data plane
// hung).
package main

import (
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/inaemu/inaemu/tap"
)

func main() {
	prefix := flag.String("prefix", "", "the ports' prefix: PREFIX-sw0, ...")
	workers := flag.Int("workers", 2, "how many ports")
	flag.Parse()
	for r := 0; r < *workers; r++ {
		name := tap.Topology{Prefix: *prefix}.SwitchPort(r)
		d, err := tap.Open(name)
		if err != nil {
			fmt.Fprintln(os.Stderr, "mute:", err)
			os.Exit(1)
		}
		go func() { // swallow whatever arrives
			buf := make([]byte, tap.MaxFrame)
			for {
				if _, err := d.ReadFrame(buf); err != nil {
					return
				}
			}
		}()
	}
	fmt.Println("mute: ready, forwarding nothing")
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	<-sig
}
