//go:build unix

package dut

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/inaemu/inaemu/emu"
)

// start runs the device command and waits until it says it is ready; the
// returned function stops it.
func (d Device) start(cfg emu.Config, timeout time.Duration) (func(), error) {
	cmd := exec.Command("sh", "-c", d.Command)
	cmd.Env = append(os.Environ(), Env(cfg, d.Prefix)...)
	// Its own process group, so stop ends the shell's children too; and
	// killed when this process dies (Linux: even by SIGKILL), so a killed
	// test or run leaves no device behind. Pdeathsig reaches the command
	// itself: a device command that starts the device with exec (as the
	// documented ones do) is the device.
	cmd.SysProcAttr = procAttr()
	if d.Log != nil {
		what := "a run"
		if d.Label != "" {
			what = d.Label
		}
		fmt.Fprintf(d.Log, "--- inaemu: starting the device for %s: INAEMU_DUT_PREFIX=%s INAEMU_DUT_FLAGS=%s\n", what, d.Prefix, JobFlags(cfg))
	}
	pr, pw := io.Pipe()
	cmd.Stdout, cmd.Stderr = pw, pw
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("device command: %w", err)
	}
	ready := d.Ready
	if ready == nil {
		ready = DefaultReady
	}
	readyc := make(chan struct{})
	var once sync.Once
	var mu sync.Mutex
	var tail []string              // the output's last lines, for an error
	scanned := make(chan struct{}) // the output is read to its end: Log is written no more
	go func() {
		defer close(scanned)
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			line := sc.Text()
			if d.Log != nil {
				fmt.Fprintln(d.Log, line)
			}
			mu.Lock()
			tail = append(tail, line)
			if len(tail) > 5 {
				tail = tail[1:]
			}
			mu.Unlock()
			if ready.MatchString(line) {
				once.Do(func() { close(readyc) })
			}
		}
		_, _ = io.Copy(io.Discard, pr)
	}()
	exited := make(chan error, 1)
	go func() {
		exited <- cmd.Wait()
		pw.Close()
	}()
	lastLines := func() string {
		mu.Lock()
		defer mu.Unlock()
		if len(tail) == 0 {
			return "no output"
		}
		return "last output: " + strings.Join(tail, " | ")
	}
	// stop ends the command (if it still runs) and returns once its
	// output is read to the end, so that the caller may read Log.
	stop := func() {
		select {
		case <-exited:
		default:
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
			select {
			case <-exited:
			case <-time.After(5 * time.Second):
				_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
				<-exited
			}
		}
		<-scanned
	}
	select {
	case <-readyc:
		return stop, nil
	case err := <-exited:
		<-scanned
		return nil, fmt.Errorf("device command exited before it was ready (%v): %s", err, lastLines())
	case <-time.After(timeout):
		stop()
		return nil, fmt.Errorf("device command not ready within %v (no output line matched %q): %s", timeout, ready, lastLines())
	}
}
