// Command inaemu is the CLI of the in-network-aggregation RoCE emulator.
// It is thin: each subcommand declares its flags, calls a package, and
// formats the result. Dispatch, flag parsing (GNU-style long flags, before
// or after the positional arguments), --help, required and mutually
// exclusive flags and shell completion come from spf13/cobra and pflag.
//
// Exit codes: 0 success, 1 a check failed (a result differs), 2 usage
// error or unreadable input, 3 the emulated job failed (transport error),
// 4 TAP devices cannot be used here (no /dev/net/tun or no CAP_NET_ADMIN),
// 5 check's verdict is undecidable (no violation, but part of the capture
// went unchecked; check --allow-unchecked exits 0 on it), 70 an internal error (a bug: a panic, reported in one line), 74 an
// output could not be created or written (a --pcap capture, an --out
// picture, the report on standard output: a full disk, ...), 130
// interrupted (SIGINT or SIGTERM: the run stopped cleanly, said how far it
// got and closed its capture).
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"sync/atomic"
	"syscall"
)

const (
	exitOK    = 0
	exitFail  = 1
	exitUsage = 2
	// exitSoftware is EX_SOFTWARE (sysexits.h): an internal error.
	exitSoftware = 70
	// exitInterrupted is what a shell reports for a process killed by
	// SIGINT (128 + 2); inaemu exits with it after stopping cleanly.
	exitInterrupted = 130
)

func main() {
	// The first SIGINT or SIGTERM cancels the context: a run stops at its
	// next check and reports what it did. Then the signals get their
	// default action back, so a second Ctrl-C ends the process at once.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	go func() {
		<-ctx.Done()
		stop()
		if !interruptible.Load() {
			// A command that does not watch the context (check,
			// conformance, ...) ends here, as the signal would end it,
			// saying how far it got if it keeps count.
			msg := "inaemu: interrupted"
			if s, ok := interruptNote.Load().(string); ok {
				msg = s
			}
			fmt.Fprintln(os.Stderr, "\n"+msg)
			os.Exit(exitInterrupted)
		}
	}()
	os.Exit(guarded(os.Args[1:], os.Stdout, os.Stderr, func(args []string, stdout, stderr io.Writer) int {
		return runContext(ctx, args, stdout, stderr)
	}))
}

// interruptible is set by a command that watches its context (run, sweep,
// switch, host): Ctrl-C then lets it stop cleanly instead of ending the
// process.
var interruptible atomic.Bool

// interruptNote is what a command that cannot stop cleanly has done so
// far, for the line Ctrl-C prints (conformance: the property and case).
var interruptNote atomic.Value

// guarded runs the command and turns a panic into one line on stderr and
// exit 70: a user never sees a Go trace. Bad input never gets here; it is
// a usage error (exit 2) with its own reason. (A panic in another
// goroutine, and the runtime's fatal errors such as running out of
// memory, cannot be recovered; run refuses jobs too big for the machine
// before allocating them.)
func guarded(args []string, stdout, stderr io.Writer, f func([]string, io.Writer, io.Writer) int) (code int) {
	defer func() {
		if p := recover(); p != nil {
			msg := strings.Join(strings.Fields(fmt.Sprint(p)), " ")
			fmt.Fprintf(stderr, "inaemu: internal error: %s; please report it with the command line\n", msg)
			code = exitSoftware
		}
	}()
	return f(args, stdout, stderr)
}

// run runs the command line args without signal handling (tests).
func run(args []string, stdout, stderr io.Writer) int {
	return runContext(context.Background(), args, stdout, stderr)
}
