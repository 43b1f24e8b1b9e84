package main

import (
	"io"
	"os"
	"sync"

	"github.com/vbauerster/mpb/v8"
	"github.com/vbauerster/mpb/v8/decor"
	"golang.org/x/term"
)

// stderrIsTerminal reports whether w is a terminal: progress bars go
// there and nowhere else (never on a pipe or into a file). Tests replace
// it to see the bar on a buffer.
var stderrIsTerminal = func(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// progressBar is a progress bar on stderr (mpb), or nothing: all its
// methods do nothing on a nil *progressBar, so callers need not ask.
type progressBar struct {
	w     io.Writer
	what  string // the bar's label: "run", "sweep", a property's name
	unit  string // what it counts: "results", "runs", "cases"
	mu    sync.Mutex
	p     *mpb.Progress
	bar   *mpb.Bar
	total int64
	last  int64 // the last count shown
}

// startProgressHook, if set, is shown every bar made (tests).
var startProgressHook func(*progressBar)

// startProgress makes the bar of a long command: only on a terminal, and
// never for --json (output meant for programs).
func startProgress(e *cmdEnv, what, unit string, asJSON bool) *progressBar {
	if asJSON || !stderrIsTerminal(e.stderr) {
		return nil
	}
	b := &progressBar{w: e.stderr, what: what, unit: unit}
	if startProgressHook != nil {
		startProgressHook(b)
	}
	return b
}

// observe is emu.Config.Progress: done of total results. The bar is made
// on the first call, when the total is known.
func (b *progressBar) observe(done, total int64) {
	if b == nil || total <= 0 {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.bar == nil || total != b.total {
		b.newBar(total)
	}
	b.bar.SetCurrent(done)
	b.last = done
}

// newBar replaces the bar (a new label or total: the next property of a
// suite).
func (b *progressBar) newBar(total int64) {
	if b.p == nil {
		b.p = mpb.New(mpb.WithOutput(b.w), mpb.WithWidth(40), mpb.WithAutoRefresh())
	}
	if b.bar != nil {
		b.bar.Abort(true)
	}
	b.total = total
	b.bar = b.p.AddBar(total,
		mpb.PrependDecorators(decor.Name("inaemu "+b.what, decor.WC{C: decor.DindentRight | decor.DextraSpace})),
		mpb.AppendDecorators(decor.Percentage(decor.WCSyncSpace), decor.CountersNoUnit(" %d/%d "+b.unit, decor.WCSyncSpace),
			decor.OnComplete(decor.AverageETA(decor.ET_STYLE_GO, decor.WCSyncSpace), "")),
		mpb.BarRemoveOnComplete())
}

// label starts a new bar for the next part of a command (conformance's
// next property).
func (b *progressBar) label(what string) {
	if b == nil {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.what != what {
		b.what, b.total = what, -1
	}
}

// stop ends the bar and waits until it is off the terminal: before the
// report is printed, so the two never mix.
func (b *progressBar) stop() {
	if b == nil {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.p == nil {
		return
	}
	if b.bar != nil && !b.bar.Completed() {
		b.bar.Abort(true)
	}
	b.p.Wait()
	b.p, b.bar = nil, nil
}
