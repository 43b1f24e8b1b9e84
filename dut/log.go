package dut

import (
	"bytes"
	"fmt"
	"os"
	"strings"
	"sync"
)

// TailLines is how many of the device's last output lines a failed run
// shows (LogFile.Tail).
const TailLines = 20

// LogFile keeps a device's output out of the report: every line goes to a
// file the report names, and the last TailLines lines are kept, to be
// shown when a run fails. It is a Device.Log.
type LogFile struct {
	// Path is the file's name.
	Path  string
	f     *os.File
	mu    sync.Mutex
	part  []byte   // a line not yet ended
	tail  []string // the last TailLines lines, oldest first
	lines int
	err   error // the first write error
}

// CreateLog creates (or truncates) the log file path; with path empty,
// a new file inaemu-dut-PREFIX-*.log in the system's temporary directory.
func CreateLog(path, prefix string) (*LogFile, error) {
	var f *os.File
	var err error
	if path == "" {
		f, err = os.CreateTemp("", "inaemu-dut-"+strings.ReplaceAll(prefix, string(os.PathSeparator), "_")+"-*.log")
	} else {
		f, err = os.Create(path)
	}
	if err != nil {
		return nil, err
	}
	return &LogFile{Path: f.Name(), f: f}, nil
}

// Write appends p to the file and keeps its complete lines' tail. A write
// error is kept (Close returns it), never returned: the device's output
// must not stop a run.
func (l *LogFile) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, err := l.f.Write(p); err != nil && l.err == nil {
		l.err = err
	}
	l.part = append(l.part, p...)
	for {
		i := bytes.IndexByte(l.part, '\n')
		if i < 0 {
			break
		}
		l.keep(string(l.part[:i]))
		l.part = l.part[i+1:]
	}
	return len(p), nil
}

func (l *LogFile) keep(line string) {
	l.lines++
	if len(l.tail) == TailLines {
		l.tail = append(l.tail[:0], l.tail[1:]...)
	}
	l.tail = append(l.tail, line)
}

// Tail is the last TailLines lines written (an unended last line too).
func (l *LogFile) Tail() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	t := append([]string(nil), l.tail...)
	if len(l.part) > 0 {
		t = append(t, string(l.part))
		if len(t) > TailLines {
			t = t[1:]
		}
	}
	return t
}

// Lines counts the lines written.
func (l *LogFile) Lines() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.part) > 0 {
		return l.lines + 1
	}
	return l.lines
}

// Close closes the file; its error, or the first write's, is returned.
func (l *LogFile) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	err := l.f.Close()
	if l.err != nil {
		return l.err
	}
	return err
}

// Summary says where the output is, in one line: "PATH (N lines)".
func (l *LogFile) Summary() string {
	return fmt.Sprintf("%s (%d lines)", l.Path, l.Lines())
}
