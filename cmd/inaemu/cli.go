package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/inaemu/inaemu/internal/units"
)

// cmdEnv is what a subcommand's body needs besides its flags: its name
// for messages, its output streams, the parsed command (to ask which flags
// were given) and the context that Ctrl-C cancels.
type cmdEnv struct {
	name           string // "check", "topo show"
	cmd            *cobra.Command
	stdout, stderr io.Writer
	ctx            context.Context
	bw             units.BandwidthUnit // --units, where the command has it
}

// usageError prints a one-line reason for a usage error on stderr.
func (e *cmdEnv) usageError(format string, a ...any) {
	printUsageError(e.stderr, e.name, fmt.Sprintf(format, a...))
}

// changed reports whether the flag was given on the command line.
func (e *cmdEnv) changed(name string) bool {
	f := e.cmd.Flags().Lookup(name)
	return f != nil && f.Changed
}

// writeJSON prints v as one JSON object on one line, its first field
// "schema" (see reportSchema): a value that cannot be encoded is a bug
// (exit 70), one that cannot be written a full disk (exitIO). Every
// --json report is written here, so all have one style.
func (e *cmdEnv) writeJSON(v any) int {
	return e.writeJSONAs(reportSchema(e.name), v)
}

// writeJSONAs is writeJSON with the schema named: a command that prints
// reports of several kinds (merge, model, codec, replay).
func (e *cmdEnv) writeJSONAs(schema string, v any) int {
	b, err := json.Marshal(v)
	if err != nil {
		fmt.Fprintf(e.stderr, "inaemu %s: %v\n", e.name, err)
		return exitSoftware
	}
	b = withSchema(schema, b)
	if _, err := e.stdout.Write(append(b, '\n')); err != nil {
		return ioError(e.stderr, e.name, "standard output", err)
	}
	return exitOK
}

// printUsageError is the one shape of every usage error: what, then where
// to read more.
func printUsageError(w io.Writer, name, msg string) {
	cmd := strings.TrimSpace("inaemu " + name)
	fmt.Fprintf(w, "%s: %s (see '%s --help')\n", cmd, msg, cmd)
}

// exitCode is a command body's non-zero exit code, passed through cobra
// as an error; the body has already said why.
type exitCode int

func (c exitCode) Error() string { return fmt.Sprintf("exit status %d", int(c)) }

// newCommand makes a subcommand whose body returns an exit code. use is
// cobra's Use line ("check FILE"); the body reads its flags through the
// variables the caller declares on cmd.Flags().
func newCommand(use, short string, stdout, stderr io.Writer, body func(e *cmdEnv, args []string) int) *cobra.Command {
	c := &cobra.Command{Use: use, Short: short}
	c.RunE = func(c *cobra.Command, args []string) error {
		e := &cmdEnv{name: commandName(c), cmd: c, stdout: stdout, stderr: stderr, ctx: c.Context()}
		if e.ctx == nil {
			e.ctx = context.Background()
		}
		if f := c.Flags().Lookup("units"); f != nil {
			u, err := units.ParseBandwidthUnit(f.Value.String())
			if err != nil {
				e.usageError("%v", err)
				return exitCode(exitUsage)
			}
			e.bw = u
		}
		if code := body(e, args); code != exitOK {
			return exitCode(code)
		}
		return nil
	}
	return c
}

// commandName is a command's path without the program: "topo show".
func commandName(c *cobra.Command) string {
	return strings.TrimPrefix(strings.TrimPrefix(c.CommandPath(), c.Root().Name()), " ")
}

// noArgs refuses positional arguments in the project's words.
func noArgs(_ *cobra.Command, args []string) error {
	if len(args) > 0 {
		return fmt.Errorf("unexpected argument %q", args[0])
	}
	return nil
}

// oneCapture wants exactly one capture file.
func oneCapture(_ *cobra.Command, args []string) error {
	if len(args) != 1 {
		return fmt.Errorf("need exactly one capture file, got %d arguments", len(args))
	}
	return nil
}

// usageTemplate is cobra's, shortened to the project's layout: the usage
// line first, the subcommands or the flags (help wrapped at 100 columns).
const usageTemplate = `Usage: {{.UseLine}}{{if .HasAvailableSubCommands}}

Commands:{{range .Commands}}{{if (or .IsAvailableCommand (eq .Name "help"))}}
  {{rpad .Name .NamePadding }} {{.Short}}{{end}}{{end}}{{end}}{{if .HasAvailableLocalFlags}}

Flags:
{{.LocalFlags.FlagUsagesWrapped 100 | trimTrailingWhitespaces}}{{end}}{{if .HasAvailableSubCommands}}

Run '{{.CommandPath}} COMMAND --help' for a command's flags.{{end}}
`

// helpTemplate puts the usage line first and the command's description
// after it.
const helpTemplate = `{{.UsageString}}{{with .Long}}
{{. | trimTrailingWhitespaces}}
{{end}}`

// rootCommand builds the command tree. A fresh tree per call: flags bind
// to variables of that call (tests run many command lines in one
// process).
func rootCommand(stdout, stderr io.Writer) *cobra.Command {
	root := &cobra.Command{
		Use:   "inaemu COMMAND",
		Short: "emulator and test harness for in-network aggregation over RoCE",
		Long:  rootLong,
		// --version: the module version and VCS revision of the build.
		Version: versionString(),
		// The project's one-line errors replace cobra's error and usage
		// dump.
		SilenceErrors: true,
		SilenceUsage:  true,
	}
	// Commands are listed in the order they are added: the everyday ones
	// first.
	cobra.EnableCommandSorting = false
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.SetUsageTemplate(usageTemplate)
	root.SetHelpTemplate(helpTemplate)
	root.SetVersionTemplate("inaemu {{.Version}}\n")
	// The help is rendered whole, then written: cobra prints a write
	// error of its own ("write /dev/stdout: no space left on device")
	// before the project's one line (runContext: exit 74).
	help := root.HelpFunc()
	root.SetHelpFunc(func(c *cobra.Command, args []string) {
		var b bytes.Buffer
		c.SetOut(&b)
		help(c, args)
		c.SetOut(stdout)
		_, _ = stdout.Write(b.Bytes()) // an error is the recorder's
	})
	root.CompletionOptions.HiddenDefaultCmd = false
	root.AddCommand(
		runCommand(stdout, stderr),
		topoCommand(stdout, stderr),
		sweepCommand(stdout, stderr),
		conformanceCommand(stdout, stderr),
		mergeCommand(stdout, stderr),
		modelCommand(stdout, stderr),
		codecCommand(stdout, stderr),
		tapCommand(stdout, stderr),
		switchCommand(stdout, stderr),
		hostCommand(stdout, stderr),
		wireCommand(stdout, stderr),
		replayCommand(stdout, stderr),
		decodeCommand(stdout, stderr),
		dissectorCommand(stdout, stderr),
		checkCommand(stdout, stderr),
		plotCommand(stdout, stderr),
		inapsCommand(stdout, stderr),
		themisCommand(stdout, stderr),
	)
	for _, c := range root.Commands() {
		// Flags are GNU-style: --name VALUE or --name=VALUE, anywhere on
		// the line; positionals may come first (inaemu decode FILE --json).
		c.Flags().SortFlags = false
	}
	return root
}

// runContext runs a command line: cobra dispatches, parses and validates;
// errors become one line on stderr and an exit code.
func runContext(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	out := &recorder{w: stdout}
	code, name := execute(ctx, args, out, stderr)
	if out.err != nil && code == exitOK { // the report was lost: a full disk
		return ioError(stderr, name, "standard output", out.err)
	}
	return code
}

// execute runs a command line on its streams; name is the command's
// ("topo show"; "" for none).
func execute(ctx context.Context, args []string, stdout, stderr io.Writer) (int, string) {
	root := rootCommand(stdout, stderr)
	// Bare 'inaemu' is a request for help, as in most cobra tools: the
	// help (with 'help' and 'completion') on stdout, exit 0.
	args = goStyleFlags(root, args)
	help := helpAsked(args)
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		// --help anywhere wins, even over a bad flag before it.
		if help {
			return pflag.ErrHelp
		}
		return suggestFlag(c, err)
	})
	root.SetArgs(append([]string{}, args...)) // never nil: cobra would read os.Args
	cmd, err := root.ExecuteContextC(ctx)
	name := ""
	if cmd != nil && cmd != root {
		name = commandName(cmd)
	}
	var code exitCode
	switch {
	case err == nil:
		return exitOK, name
	case errors.As(err, &code):
		return int(code), name
	}
	if r, ok := stdout.(*recorder); ok && r.err != nil && errors.Is(err, r.err) {
		return exitOK, name // --version on a full disk: runContext says so, exit 74
	}
	printUsageError(stderr, name, cobraReason(err))
	return exitUsage, name
}

// helpAsked reports whether --help or -h stands among the flags (before a
// lone "--").
func helpAsked(args []string) bool {
	for _, a := range args {
		switch a {
		case "--":
			return false
		case "--help", "-h":
			return true
		}
	}
	return false
}

// goStyleFlags rewrites -name to --name for the long flags of the command
// the line runs (and -help): inaemu's flags were parsed by Go's flag
// package before, which takes both, and scripts written then keep working.
// Values are left alone, and so is everything after a lone "--".
func goStyleFlags(root *cobra.Command, args []string) []string {
	cmd, _, err := root.Find(args)
	if err != nil || cmd == nil {
		return args
	}
	out := append([]string{}, args...)
	value := false // the previous argument is a flag that takes this one as its value
	for i, a := range out {
		if a == "--" {
			break
		}
		if value {
			value = false
			continue
		}
		name, hasValue := strings.CutPrefix(a, "--")
		if !hasValue && strings.HasPrefix(a, "-") && len(a) > 2 {
			n, _, _ := strings.Cut(a[1:], "=")
			if n == "help" || cmd.Flags().Lookup(n) != nil {
				out[i], name, hasValue = "-"+a, a[1:], true
			}
		}
		if hasValue && !strings.Contains(name, "=") {
			if f := cmd.Flags().Lookup(name); f != nil && f.NoOptDefVal == "" {
				value = true
			}
		}
	}
	return out
}

var (
	requiredRE  = regexp.MustCompile(`^required flag\(s\) (.*) not set$`)
	exclusiveRE = regexp.MustCompile(`^if any flags in the group \[(.*)\] are set none of the others can be; \[(.*)\] were all set$`)
	togetherRE  = regexp.MustCompile(`^if any flags in the group \[(.*)\] are set they must all be set; missing \[(.*)\]$`)
)

// cobraReason puts cobra's and pflag's messages in the project's words
// and on one line: "need --out", "--tap and --through-switch: choose one".
func cobraReason(err error) string {
	msg := err.Error()
	if m := requiredRE.FindStringSubmatch(msg); m != nil {
		var names []string
		for _, n := range strings.Split(m[1], ", ") {
			names = append(names, "--"+strings.Trim(n, `"`))
		}
		return "need " + strings.Join(names, " and ")
	}
	if m := exclusiveRE.FindStringSubmatch(msg); m != nil {
		var names []string
		set := strings.Fields(m[2]) // sorted by cobra: named in the group's order
		for _, n := range strings.Fields(m[1]) {
			if slices.Contains(set, n) {
				names = append(names, "--"+n)
			}
		}
		return strings.Join(names, " and ") + ": choose one"
	}
	if m := togetherRE.FindStringSubmatch(msg); m != nil {
		return "--" + strings.Join(strings.Fields(m[1]), " and --") + " go together: need --" + strings.Join(strings.Fields(m[2]), " and --")
	}
	// cobra suggests commands on further lines: "unknown command "decodez"
	// for "inaemu"\n\nDid you mean this?\n\tdecode\n".
	if before, after, ok := strings.Cut(msg, "\n\nDid you mean this?\n"); ok {
		msg = before + "; did you mean " + strings.Join(strings.Fields(after), " or ") + "?"
	}
	return strings.Join(strings.Fields(msg), " ")
}

// parentCommand is a command of subcommands (topo show, tap up, plot
// psn): alone or with an unknown word (a noun: command, picture) it is a
// usage error that lists them.
func parentCommand(name, noun, short string, stdout, stderr io.Writer) *cobra.Command {
	var c *cobra.Command
	c = newCommand(name, short, stdout, stderr, func(e *cmdEnv, args []string) int {
		var subs []string
		for _, s := range c.Commands() {
			subs = append(subs, "'"+s.Name()+"'")
		}
		want := strings.Join(subs, " or ")
		if len(args) == 0 {
			e.usageError("want %s", want)
		} else {
			e.usageError("unknown %s %q: want %s", noun, args[0], want)
		}
		return exitUsage
	})
	return c
}
