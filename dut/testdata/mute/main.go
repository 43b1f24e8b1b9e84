// Command mute is a device under test that stops forwarding: it holds
// its TAP ports PREFIX-sw0..N-1 (so they are up), says it is ready, and
// then reads every frame and sends nothing, until it is stopped. The
// stall detector's tests run it (a dead switch, or one whose data plane
// hung).
//
// With --forward-other it floods every frame that is not RoCE (the start
// barrier's ARPs) to the other ports, and with --beacon D it sends a
// broadcast frame that is not RoCE (an LLDP frame, as a switch's control
// plane does) out of every port each D: a switch whose aggregation hung
// while the rest of it runs, which must still count as stalled and
// silent.
package main

import (
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"github.com/inaemu/inaemu/frames"
	"github.com/inaemu/inaemu/tap"
)

func main() {
	prefix := flag.String("prefix", "", "the ports' prefix: PREFIX-sw0, ...")
	workers := flag.Int("workers", 2, "how many ports")
	other := flag.Bool("forward-other", false, "flood every frame that is not RoCE to the other ports")
	beacon := flag.Duration("beacon", 0, "send an LLDP broadcast out of every port this often (0: never)")
	flag.Parse()
	var mu sync.Mutex // serialises the writes
	var ports []tap.Device
	for r := 0; r < *workers; r++ {
		name := tap.Topology{Prefix: *prefix}.SwitchPort(r)
		d, err := tap.Open(name)
		if err != nil {
			fmt.Fprintln(os.Stderr, "mute:", err)
			os.Exit(1)
		}
		ports = append(ports, d)
	}
	for r, d := range ports {
		go func() { // swallow whatever arrives, flooding what is not RoCE if asked
			buf := make([]byte, tap.MaxFrame)
			var v frames.View
			for {
				n, err := d.ReadFrame(buf)
				if err != nil {
					return
				}
				if !*other || !errors.Is(v.Parse(buf[:n]), frames.ErrNotRoCE) {
					continue
				}
				mu.Lock()
				for q, p := range ports {
					if q != r {
						_ = p.WriteFrame(buf[:n])
					}
				}
				mu.Unlock()
			}
		}()
	}
	if *beacon > 0 {
		go func() {
			lldp := make([]byte, 60) // to the LLDP multicast address, EtherType 0x88cc
			copy(lldp, []byte{0x01, 0x80, 0xc2, 0x00, 0x00, 0x0e, 0x02, 0, 0, 0, 0, 0x01})
			binary.BigEndian.PutUint16(lldp[12:], 0x88cc)
			for range time.Tick(*beacon) {
				mu.Lock()
				for _, p := range ports {
					_ = p.WriteFrame(lldp)
				}
				mu.Unlock()
			}
		}()
	}
	fmt.Println("mute: ready, forwarding nothing")
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	<-sig
}
