package main

import (
	"bytes"
	"fmt"
	"io"
	"os"
)

// readPlotInputs reads each named input (a file, or - for standard input)
// and parses it with parse, gathering what every input gives.
func readPlotInputs[T any](files []string, parse func(name string, r io.Reader) ([]T, error)) ([]T, error) {
	var all []T
	for _, name := range files {
		b, err := readInput(name)
		if err != nil {
			return nil, err
		}
		got, err := parse(name, bytes.NewReader(b))
		if err != nil {
			return nil, err
		}
		all = append(all, got...)
	}
	return all, nil
}

// writePicture writes a chart to out in format (pictureFormat's) and
// reports the exit status when it could not: an I/O error as the
// commands report one, a drawing error in one line with the half-written
// file removed. ok is true when the picture was written.
func writePicture(e *cmdEnv, out, format string, write func(w io.Writer, format string) error) (code int, ok bool) {
	ioErr, err := writeFile(out, func(w io.Writer) error { return write(w, format) })
	if ioErr != nil {
		return ioError(e.stderr, e.name, "--out "+out, ioErr), false
	}
	if err != nil {
		os.Remove(out)
		fmt.Fprintf(e.stderr, "inaemu plot: %s: %v\n", out, err)
		return exitUsage, false
	}
	return exitOK, true
}
