package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
)

// exitIO is EX_IOERR (sysexits.h): an output (a capture, a picture, the
// report on standard output) could not be created or written: a full
// disk, a directory that is not there. It is the machine's failure, not
// the network's (3) nor the input's (2).
const exitIO = 74

// recorder passes writes on and keeps the first error, for writers that
// do not report one (fmt.Fprintf on standard output) or mix it with their
// own (a picture's renderer, the emulator's capture).
type recorder struct {
	w   io.Writer
	err error
}

func (r *recorder) Write(p []byte) (int, error) {
	if r.err != nil {
		return 0, r.err
	}
	n, err := r.w.Write(p)
	if err != nil {
		r.err = err
	}
	return n, err
}

// ioError says in one line which output could not be written, and why,
// and returns exitIO: "inaemu run: --pcap /dev/full: no space left on
// device". what names the output, so a path error is cut to its cause.
func ioError(stderr io.Writer, name, what string, err error) int {
	if pe := (*os.PathError)(nil); errors.As(err, &pe) {
		err = pe.Err
	}
	fmt.Fprintf(stderr, "%s: %s: %v\n", strings.TrimSpace("inaemu "+name), what, err)
	return exitIO
}

// writeFile creates path and writes it with write, through a buffer. A
// failure to create or write the file is ioErr (exitIO); an error of
// write's own (what it was given cannot be written out) is err.
func writeFile(path string, write func(io.Writer) error) (ioErr, err error) {
	f, err := os.Create(path)
	if err != nil {
		return err, nil
	}
	rec := &recorder{w: f}
	w := bufio.NewWriter(rec)
	err = write(w)
	_ = w.Flush() // its error is rec's
	cerr := f.Close()
	switch {
	case rec.err != nil:
		return rec.err, nil
	case cerr != nil:
		return cerr, nil
	}
	return nil, err
}
