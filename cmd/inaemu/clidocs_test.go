package main

import (
	"flag"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var updateDocs = flag.Bool("update-docs", false, "regenerate docs/cli and docs/man from the command tree (make docs)")

// The checked-in CLI reference (docs/cli/*.md) and man pages
// (docs/man/*.1) are what cobra's generators make of the code: the test
// regenerates them into a temporary directory and fails on any
// difference, a missing page or a stale one. 'make docs' (this test with
// -update-docs) rewrites them.
func TestCLIReference(t *testing.T) {
	repo := filepath.Join("..", "..")
	md, man := filepath.Join(repo, "docs", "cli"), filepath.Join(repo, "docs", "man")
	if *updateDocs {
		for _, d := range []string{md, man} {
			require.NoError(t, os.RemoveAll(d))
		}
		require.NoError(t, genCLIDocs(md, man))
		t.Logf("regenerated %s and %s", md, man)
	}
	tmp := t.TempDir()
	require.NoError(t, genCLIDocs(filepath.Join(tmp, "cli"), filepath.Join(tmp, "man")))
	for _, d := range []struct{ got, want string }{{filepath.Join(tmp, "cli"), md}, {filepath.Join(tmp, "man"), man}} {
		gen, err := cliDocFiles(d.got)
		require.NoError(t, err)
		have, err := cliDocFiles(d.want)
		require.NoError(t, err, "no checked-in %s: run 'make docs'", d.want)
		var names []string
		for n := range gen {
			names = append(names, n)
		}
		sort.Strings(names)
		for _, n := range names {
			h, ok := have[n]
			if assert.True(t, ok, "%s/%s is missing: run 'make docs'", d.want, n) && string(gen[n]) != string(h) {
				g, w := strings.Split(string(gen[n]), "\n"), strings.Split(string(h), "\n")
				i := 0
				for i < len(g) && i < len(w) && g[i] == w[i] {
					i++
				}
				line := func(l []string) string {
					if i < len(l) {
						return l[i]
					}
					return "(end of file)"
				}
				t.Errorf("%s/%s differs from the code at line %d: run 'make docs'\n  code:       %.200s\n  checked in: %.200s", d.want, n, i+1, line(g), line(w))
			}
		}
		for n := range have {
			_, ok := gen[n]
			assert.True(t, ok, "%s/%s is no command's page any more: run 'make docs'", d.want, n)
		}
	}
	// Deterministic: a second generation is byte for byte the first.
	again := t.TempDir()
	require.NoError(t, genCLIDocs(filepath.Join(again, "cli"), filepath.Join(again, "man")))
	a, _ := cliDocFiles(filepath.Join(tmp, "man"))
	b, _ := cliDocFiles(filepath.Join(again, "man"))
	assert.Equal(t, a, b)
}
