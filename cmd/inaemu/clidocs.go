package main

import (
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra/doc"
)

// The CLI reference is generated from the command tree by cobra's
// generators: docs/cli/*.md (Markdown, one page per command) and
// docs/man/*.1 (man pages). 'make docs' regenerates both (through
// TestCLIReference -update-docs), and TestCLIReference fails when the
// checked-in files differ from what the code generates.

// manDate is the man pages' header date: fixed, so that the pages are a
// function of the code alone (cobra would write the month they were
// generated). Move it on when the CLI changes much.
var manDate = time.Date(2026, time.November, 1, 0, 0, 0, 0, time.UTC)

// genCLIDocs writes the Markdown reference into mdDir and the man pages
// into manDir.
func genCLIDocs(mdDir, manDir string) error {
	root := rootCommand(io.Discard, io.Discard)
	root.DisableAutoGenTag = true // no "generated on DATE" line
	root.InitDefaultHelpCmd()
	root.InitDefaultCompletionCmd()
	for _, d := range []string{mdDir, manDir} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	if err := doc.GenMarkdownTree(root, mdDir); err != nil {
		return err
	}
	return doc.GenManTree(root, &doc.GenManHeader{Title: "INAEMU", Section: "1", Date: &manDate, Source: "inaemu", Manual: "inaemu manual"}, manDir)
}

// cliDocFiles lists the generated files of a directory, by name.
func cliDocFiles(dir string) (map[string][]byte, error) {
	out := map[string][]byte{}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	for _, e := range ents {
		if e.IsDir() {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			return nil, err
		}
		out[e.Name()] = b
	}
	return out, nil
}
