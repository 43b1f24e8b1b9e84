package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
)

// cmdFlags is a subcommand's flag set. Go's flag package accepts --name as
// well as -name; usage text shows the long form.
type cmdFlags struct {
	*flag.FlagSet
	name, synopsis string
	stdout, stderr io.Writer
	// hidden flags are left out of the usage text: a command declares
	// them only to refuse them with a reason.
	hidden map[string]bool
}

func newFlagSet(name, synopsis string, stdout, stderr io.Writer) *cmdFlags {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	// The flag package's own messages are replaced by one-line reasons.
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	return &cmdFlags{FlagSet: fs, name: name, synopsis: synopsis, stdout: stdout, stderr: stderr}
}

func (c *cmdFlags) printUsage(w io.Writer) {
	fmt.Fprintf(w, "Usage: inaemu %s %s\n\nFlags:\n", c.name, c.synopsis)
	c.VisitAll(func(f *flag.Flag) {
		if c.hidden[f.Name] {
			return
		}
		arg, help := flag.UnquoteUsage(f)
		if arg != "" {
			arg = " " + strings.ToUpper(arg)
		}
		def := ""
		if f.DefValue != "" && f.DefValue != "false" {
			def = fmt.Sprintf(" (default %s)", f.DefValue)
		}
		fmt.Fprintf(w, "  --%s%s\n      %s%s\n", f.Name, arg, help, def)
	})
}

// parse parses flags that may come before or after the positional
// arguments (inaemu decode FILE --json) and returns the positionals. A lone
// "--" ends flag parsing. --help prints usage on stdout and returns
// flag.ErrHelp.
func (c *cmdFlags) parse(args []string) ([]string, error) {
	for _, a := range args {
		if a == "--" {
			break
		}
		if a == "-h" || a == "-help" || a == "--help" {
			c.printUsage(c.stdout)
			return nil, flag.ErrHelp
		}
	}
	var pos []string
	for {
		if err := c.Parse(args); err != nil {
			c.usageError("%v", err)
			return nil, err
		}
		rest := c.Args()
		if len(rest) == 0 {
			return pos, nil
		}
		if len(args) > len(rest) && args[len(args)-len(rest)-1] == "--" {
			return append(pos, rest...), nil
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
}

// parseFlagsOnly parses a command that takes no positional arguments; on
// failure it returns false and the exit code (the reason is printed).
func (c *cmdFlags) parseFlagsOnly(args []string) (int, bool) {
	pos, err := c.parse(args)
	if err != nil {
		return flagExit(err), false
	}
	if len(pos) != 0 {
		c.usageError("unexpected argument %q", pos[0])
		return exitUsage, false
	}
	return exitOK, true
}

// usageError prints a one-line reason for a usage error on stderr.
func (c *cmdFlags) usageError(format string, a ...any) {
	fmt.Fprintf(c.stderr, "inaemu %s: %s (see 'inaemu %s --help')\n", c.name, fmt.Sprintf(format, a...), c.name)
}

// flagExit maps a parse error to an exit code: --help is success, anything
// else is a usage error (the flag package has already printed why).
func flagExit(err error) int {
	if errors.Is(err, flag.ErrHelp) {
		return exitOK
	}
	return exitUsage
}
