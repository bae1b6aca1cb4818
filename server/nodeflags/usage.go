package nodeflags

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/kvselect/kvselect/internal/suggest"
)

// Exit codes of kvselect.
const (
	ExitError = 1 // the node could not start, or stopped on an error
	ExitUsage = 2 // the command line is wrong
)

// UsageError is a wrong command line: one line on stderr, exit 2.
type UsageError struct {
	Msg  string
	Help string // the command whose --help lists the flags
}

func (e *UsageError) Error() string {
	return e.Msg + "; run " + e.Help + " --help for the flags"
}

// ExitCode is the process's exit status for what a command returned.
func ExitCode(err error) int {
	var usage *UsageError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &usage):
		return ExitUsage
	}
	return ExitError
}

// HelpOut is where help goes: stdout, as a help that was asked for is the
// command's output. Tests capture it.
var HelpOut io.Writer = os.Stdout

// TestOnly are the node's flags for test harnesses (fault injection):
// parsed like any other, but listed only by --help-all, so that the help
// a newcomer reads holds what a deployment sets. jepsen/doc.go documents
// them.
var TestOnly = map[string]bool{"peer-dial": true, "kv-dial": true}

// Command is one of kvselect's commands as its command line sees it.
type Command struct {
	Path   string          // "kvselect", "kvselect slot-tracker"
	Header string          // the help above the flags
	Hidden map[string]bool // flags only --help-all lists
	// Subcommands are the words a first argument may be; a stray word is
	// then an unknown command with the nearest of them suggested. Empty:
	// the command takes flags only.
	Subcommands []string
}

// Parse parses args into fs. The flag package's own messages (its whole
// usage after a typo) are replaced: -h, --help and --help-all print the
// help on HelpOut and return flag.ErrHelp; a bad flag or an argument is
// a UsageError naming it, with the nearest flags.
func (c Command) Parse(fs *flag.FlagSet, args []string) error {
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	all := fs.Bool("help-all", false, "print the help with every flag, those for test harnesses too, and exit")
	err := fs.Parse(args)
	switch {
	case errors.Is(err, flag.ErrHelp):
		c.printHelp(HelpOut, fs, false)
		return flag.ErrHelp
	case err != nil:
		return c.flagError(fs, err)
	case *all:
		c.printHelp(HelpOut, fs, true)
		return flag.ErrHelp
	case fs.NArg() > 0:
		msg := fmt.Sprintf("unexpected argument %q (%s takes flags only)", fs.Arg(0), c.Path)
		if len(c.Subcommands) > 0 && !strings.HasPrefix(fs.Arg(0), "-") {
			msg = fmt.Sprintf("unknown command %q%s", fs.Arg(0), DidYouMean(suggest.Names(fs.Arg(0), c.Subcommands)))
		}
		return &UsageError{Msg: msg, Help: c.Path}
	}
	return nil
}

// flagError rewords an error of fs.Parse: which flag, and for an unknown
// one the flags nearest to it.
func (c Command) flagError(fs *flag.FlagSet, err error) error {
	msg := strings.NewReplacer("flag -", "flag --", "argument: -", "argument: --", "for -", "for --").Replace(err.Error())
	if name, ok := strings.CutPrefix(msg, "flag provided but not defined: -"); ok {
		name = strings.TrimLeft(name, "-")
		msg = "unknown flag --" + name
		var names []string
		fs.VisitAll(func(f *flag.Flag) {
			if !c.Hidden[f.Name] {
				names = append(names, "--"+f.Name)
			}
		})
		msg += DidYouMean(suggest.Names("--"+name, names))
	}
	return &UsageError{Msg: msg, Help: c.Path}
}

// DidYouMean words up to three suggestions: " (did you mean --port?)".
func DidYouMean(near []string) string {
	const most = 3
	switch {
	case len(near) == 0:
		return ""
	case len(near) > most:
		near = append(near[:most:most], "…")
	}
	return " (did you mean " + strings.Join(near, ", ") + "?)"
}

// printHelp prints the header and the flags, each with its environment
// variables; with all, the test harnesses' flags too.
func (c Command) printHelp(w io.Writer, fs *flag.FlagSet, all bool) {
	shown := flag.NewFlagSet(c.Path, flag.ContinueOnError)
	shown.SetOutput(w)
	hidden := 0
	fs.VisitAll(func(f *flag.Flag) {
		if c.Hidden[f.Name] && !all {
			hidden++
			return
		}
		shown.Var(f.Value, f.Name, f.Usage)
		shown.Lookup(f.Name).DefValue = f.DefValue // the default, not what was parsed before -h
	})
	fmt.Fprint(w, c.Header)
	fmt.Fprintln(w, "\nFlags:")
	shown.PrintDefaults()
	if hidden > 0 {
		fmt.Fprintf(w, "\n%d flags for test harnesses (fault injection) are not shown: %s --help-all lists every flag.\n", hidden, c.Path)
	}
}

// SlotTrackerCommand is the first argument that runs the slot tracker
// (SPEC §9) instead of a node.
const SlotTrackerCommand = "slot-tracker"

// NodeCommand is kvselect itself.
var NodeCommand = Command{Path: "kvselect", Hidden: TestOnly, Subcommands: []string{SlotTrackerCommand, "help"},
	Header: fmt.Sprintf("Usage:\n"+
		"  kvselect [flags]                 run a node\n"+
		"  kvselect %s [flags]    run Dynamo's standalone slot tracker API instead (kvselect help %[1]s)\n"+
		"  kvselect help [%[1]s]    this help, or the slot tracker's\n", SlotTrackerCommand)}
