package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/inaemu/inaemu/internal/taptest"
	"github.com/inaemu/inaemu/internal/testtool"
	"github.com/inaemu/inaemu/tap"
)

// The README's examples, and those of every page under docs/, are run, so
// that none of them rots. Their convention:
//
//   - a ```sh block is an example: its lines run in order, every block of a
//     page in one working directory (a later example may use an earlier
//     one's files), with the built inaemu first on PATH and the
//     repository's contrib/ and examples/ in that directory, as in a clone;
//   - a ```yaml file=examples/NAME block shows a file of examples/ and must
//     equal it; a ```yaml file=NAME block is a file the page's examples
//     use, written first;
//   - ```text blocks are synopses and sample output, not run; a ```text
//     block right after a one-command ```sh block is that command's
//     output and must match it exactly;
//   - an `inaemu` (or `wait`) line must exit 0, or the N of a trailing
//     `# exit N` comment;
//   - `make build`, `make demo` and `go install` run for real against the
//     repository (the demo's capture goes into the working directory's
//     bin/); `wireshark FILE` is checked by reading FILE with tshark;
//   - a block that makes TAPs (`inaemu tap up`) needs root: CI runs it,
//     elsewhere it is skipped with a one-line reason.

type readmeBlock struct {
	lang, file string
	body       string
	line       int // of the opening fence
	// adjacent: only blank lines separate it from the block before.
	adjacent bool
}

var fenceRE = regexp.MustCompile("(?m)^```([a-z]*)( file=([^\\s]+))?\n")

// docPages are the pages whose examples run: the README and docs/*.md,
// as paths relative to the repository.
func docPages(t *testing.T) []string {
	t.Helper()
	pages, err := filepath.Glob(filepath.Join("..", "..", "docs", "*.md"))
	require.NoError(t, err)
	out := []string{"README.md"}
	for _, p := range pages {
		out = append(out, filepath.Join("docs", filepath.Base(p)))
	}
	return out
}

func readmeBlocks(t *testing.T, page string) []readmeBlock {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", page))
	require.NoError(t, err)
	s := string(b)
	var out []readmeBlock
	for pos := 0; ; {
		m := fenceRE.FindStringSubmatchIndex(s[pos:])
		if m == nil {
			break
		}
		start := pos + m[1]
		end := strings.Index(s[start:], "\n```")
		require.GreaterOrEqual(t, end, 0, "unclosed fence at byte %d", pos+m[0])
		blk := readmeBlock{lang: s[pos+m[2] : pos+m[3]], body: s[start : start+end+1], line: strings.Count(s[:pos+m[0]], "\n") + 1}
		if m[6] >= 0 {
			blk.file = s[pos+m[6] : pos+m[7]]
		}
		blk.adjacent = len(out) > 0 && strings.TrimSpace(s[pos:pos+m[0]]) == ""
		out = append(out, blk)
		pos = start + end + 4
	}
	return out
}

// readmeLines joins continued lines.
func readmeLines(body string) []string {
	var out []string
	cur := ""
	for _, l := range strings.Split(strings.TrimRight(body, "\n"), "\n") {
		if strings.HasSuffix(l, "\\") {
			cur += strings.TrimSuffix(l, "\\")
			continue
		}
		out = append(out, cur+l)
		cur = ""
	}
	return out
}

var imageRE = regexp.MustCompile(`!\[[^\]]*\]\(([^)]+)\)`)

var exitRE = regexp.MustCompile(`#\s*exit (\d+)`)

// readmeScript turns a sh block into a bash script that checks what each
// inaemu and wait line exits with.
func readmeScript(body string) string {
	var b strings.Builder
	b.WriteString("set -e\n")
	b.WriteString(`__check() { want=$1; shift; rc=0; "$@" || rc=$?; if [ $rc -ne $want ]; then echo "README example exited $rc, want $want: $*" >&2; exit 1; fi; }` + "\n")
	for _, l := range readmeLines(body) {
		trim := strings.TrimSpace(l)
		want := 0
		if m := exitRE.FindStringSubmatch(trim); m != nil {
			want, _ = strconv.Atoi(m[1])
		}
		// A checked line has no shell syntax after the command: the
		// comment goes, the command runs under __check.
		simple := !strings.ContainsAny(trim, "&;|>") || strings.Index(trim, " #") > 0 && !strings.ContainsAny(trim[:strings.Index(trim, " #")], "&;|>")
		if (strings.HasPrefix(trim, "inaemu ") || strings.HasPrefix(trim, "wait ")) && simple {
			cmd := trim
			if i := strings.Index(cmd, " #"); i > 0 {
				cmd = cmd[:i]
			}
			fmt.Fprintf(&b, "__check %d %s\n", want, cmd)
			continue
		}
		b.WriteString(l + "\n")
	}
	b.WriteString("exit 0\n")
	return b.String()
}

func TestReadmeExamples(t *testing.T) {
	bin := inaemuBinary(t)
	repo, err := filepath.Abs(filepath.Join("..", ".."))
	require.NoError(t, err)
	// The shims call the real tools by absolute path: a shim named make
	// that ran "make" would find itself on PATH and recurse without end.
	goTool, err := exec.LookPath("go")
	require.NoError(t, err)
	makeTool, err := exec.LookPath("make")
	if err != nil {
		t.Skipf("SKIP: no make on PATH (%v): the README's examples are not run", err)
	}
	shims := t.TempDir()
	require.NoError(t, os.Symlink(bin, filepath.Join(shims, "inaemu")))
	haveTshark := testtool.HaveTshark()
	// make and go run in the repository; make's demo writes into the
	// working directory. wireshark: the capture must open in tshark.
	// make: the target's commands as the Makefile has them (make -n), of
	// which the ones that run inaemu run with the binary under test (the
	// ones that build it are what built it); go install: the package
	// must be the one built.
	shim := map[string]string{
		"make": fmt.Sprintf("#!/bin/sh\nset -e\n%q -n -s -C %q BIN=%q DEMO_PCAP=\"$PWD/bin/demo.pcapng\" \"$@\" > make.cmds\ngrep -q . make.cmds\ngrep '^%s ' make.cmds | sh -e\n", makeTool, repo, bin, bin),
		"go":   fmt.Sprintf("#!/bin/sh\n[ \"$1\" = install ] || exit 1\ncd %q && exec %q list \"$2\" > /dev/null\n", repo, goTool),
		"wireshark": "#!/bin/sh\nfor f; do :; done\n[ -s \"$f\" ] || { echo \"wireshark: no capture $f\" >&2; exit 1; }\n" +
			fmt.Sprintf("if %v; then exec tshark -r \"$f\" -c 1 > /dev/null; fi\n", haveTshark),
	}
	for name, text := range shim {
		require.NoError(t, os.WriteFile(filepath.Join(shims, name), []byte(text), 0o755))
	}
	// A home of their own: an example that installs into the user's
	// folders (inaemu dissector --install) must not change the machine's,
	// where tshark in other tests would load the dissector twice.
	home := t.TempDir()
	env := append(os.Environ(), "PATH="+shims+string(os.PathListSeparator)+os.Getenv("PATH"),
		"HOME="+home, "XDG_CONFIG_HOME="+filepath.Join(home, ".config"))

	ran := 0
	for _, page := range docPages(t) {
		t.Run(page, func(t *testing.T) {
			// A page's examples run in a directory of their own, laid
			// out as a clone's root is for what they read.
			work := t.TempDir()
			for _, dir := range []string{"contrib", "examples"} {
				require.NoError(t, os.Symlink(filepath.Join(repo, dir), filepath.Join(work, dir)))
			}
			require.NoError(t, os.MkdirAll(filepath.Join(work, "bin"), 0o755))
			blocks := readmeBlocks(t, page)
			for _, b := range blocks {
				if b.file == "" {
					continue
				}
				if strings.HasPrefix(b.file, "examples/") {
					have, err := os.ReadFile(filepath.Join(repo, b.file))
					require.NoError(t, err, "%s:%d shows %s", page, b.line, b.file)
					assert.Equal(t, string(have), b.body, "%s:%d shows %s as it is not", page, b.line, b.file)
					continue
				}
				require.NoError(t, os.WriteFile(filepath.Join(work, b.file), []byte(b.body), 0o644))
			}
			for i, b := range blocks {
				if b.lang != "sh" {
					continue
				}
				ran++
				t.Run(fmt.Sprintf("line%d", b.line), func(t *testing.T) {
					cmd := exec.Command("bash", "-c", readmeScript(b.body))
					if strings.Contains(b.body, "inaemu tap up") {
						testtool.Require(t, "the TAP example at "+page+fmt.Sprintf(":%d", b.line), tap.Usable())
						// Its interfaces (the default prefix ina) and
						// background switch in namespaces of their own: no
						// clash with another run, nothing left if killed.
						c, err := taptest.Isolated("bash", "-c", readmeScript(b.body))
						testtool.Require(t, "the TAP example at "+page+fmt.Sprintf(":%d", b.line), err)
						cmd = c
					}
					if strings.Contains(b.body, "tshark ") && !haveTshark {
						testtool.Need(t, "tshark", testtool.HaveTshark)
					}
					cmd.Dir, cmd.Env = work, env
					out, err := cmd.Output()
					var stderr string
					if ee, ok := err.(*exec.ExitError); ok {
						stderr = string(ee.Stderr)
					}
					require.NoError(t, err, "%s:%d\n%s\nstdout:\n%s\nstderr:\n%s", page, b.line, b.body, out, stderr)
					// A one-command block followed by its output.
					if i+1 < len(blocks) && blocks[i+1].lang == "text" && blocks[i+1].adjacent && len(readmeLines(b.body)) == 1 {
						assert.Equal(t, blocks[i+1].body, string(out), "the output shown after %s:%d", page, b.line)
					}
				})
			}
			// A picture the page shows and its examples draw must be
			// what they draw (regenerate: run the page's commands and
			// copy the file into docs/).
			text, err := os.ReadFile(filepath.Join(repo, page))
			require.NoError(t, err)
			for _, m := range imageRE.FindAllStringSubmatch(string(text), -1) {
				drawn, err := os.ReadFile(filepath.Join(work, filepath.Base(m[1])))
				if err != nil {
					continue // not drawn by this page's examples
				}
				shown, err := os.ReadFile(filepath.Join(repo, filepath.Dir(page), m[1]))
				require.NoError(t, err)
				assert.True(t, string(drawn) == string(shown), "%s shows %s, which its examples no longer draw: regenerate it", page, m[1])
			}
		})
	}
	assert.Greater(t, ran, 15, "the examples of the README and docs/")
}

// TestExamplesAreRun: every scenario under examples/ is run by an example
// of the README or docs/ (which TestReadmeExamples runs), and every
// relative link of those pages names a file that exists.
func TestExamplesAreRun(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("..", "..", "examples", "*.yaml"))
	require.NoError(t, err)
	require.NotEmpty(t, files)
	var sh strings.Builder
	linkRE := regexp.MustCompile(`\]\(([^)#:\s]+)(#[^)]*)?\)`)
	for _, page := range docPages(t) {
		for _, b := range readmeBlocks(t, page) {
			if b.lang == "sh" {
				sh.WriteString(b.body)
			}
		}
		text, err := os.ReadFile(filepath.Join("..", "..", page))
		require.NoError(t, err)
		for _, m := range linkRE.FindAllStringSubmatch(string(text), -1) {
			target := filepath.Join("..", "..", filepath.Dir(page), m[1])
			_, err := os.Stat(target)
			assert.NoError(t, err, "%s links to %s", page, m[1])
		}
	}
	for _, f := range files {
		name := "examples/" + filepath.Base(f)
		assert.Regexp(t, `inaemu run [^\n]*--scenario `+regexp.QuoteMeta(name), sh.String(), "%s is run by no example in the README or docs/", name)
	}
}

// TestReadmeScript: the harness checks exit codes the way the README
// states them (an example that fails, or exits otherwise than its
// comment says, fails the test).
func TestReadmeScript(t *testing.T) {
	run := func(body string) error {
		cmd := exec.Command("bash", "-c", readmeScript(body))
		cmd.Env = append(os.Environ(), "PATH="+t.TempDir()+":/usr/bin:/bin")
		return cmd.Run()
	}
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "inaemu"), []byte("#!/bin/sh\nexit $1\n"), 0o755))
	runIn := func(body string) error {
		cmd := exec.Command("bash", "-c", readmeScript(body))
		cmd.Env = append(os.Environ(), "PATH="+dir+":/usr/bin:/bin")
		return cmd.Run()
	}
	assert.NoError(t, runIn("inaemu 0\n"))
	assert.Error(t, runIn("inaemu 3\ninaemu 0\n"), "a failing example fails")
	assert.NoError(t, runIn("inaemu 1   # exit 1: documented\n"))
	assert.Error(t, runIn("inaemu 0   # exit 1\n"), "exit 0 where the README says 1")
	assert.NoError(t, runIn("inaemu 0 \\\n  --more\n"), "continued lines")
	assert.Error(t, run("nosuchcommand-xyz\nexit 0\n"), "a command that is missing fails the block")
}
