package main

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
	exitError = 1 // the node could not start, or stopped on an error
	exitUsage = 2 // the command line is wrong
)

// usageError is a wrong command line: one line on stderr, exit 2.
type usageError struct {
	msg  string
	help string // the command whose --help lists the flags
}

func (e *usageError) Error() string {
	return e.msg + "; run " + e.help + " --help for the flags"
}

// exitCode is the process's exit status for what run returned.
func exitCode(err error) int {
	var usage *usageError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &usage):
		return exitUsage
	}
	return exitError
}

// helpOut is where help goes: stdout, as a help that was asked for is the
// command's output. Tests capture it.
var helpOut io.Writer = os.Stdout

// testOnlyFlags are the node's flags for test harnesses (fault injection):
// parsed like any other, but listed only by --help-all, so that the help
// a newcomer reads holds what a deployment sets. jepsen/doc.go documents
// them.
var testOnlyFlags = map[string]bool{"peer-dial": true, "kv-dial": true}

// command is one of kvselect's commands as its command line sees it.
type command struct {
	path   string          // "kvselect", "kvselect slot-tracker"
	header string          // the help above the flags
	hidden map[string]bool // flags only --help-all lists
}

// parse parses args into fs. The flag package's own messages (its whole
// usage after a typo) are replaced: -h, --help and --help-all print the
// help on helpOut and return flag.ErrHelp; a bad flag or an argument is
// a usageError naming it, with the nearest flags.
func (c command) parse(fs *flag.FlagSet, args []string) error {
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	all := fs.Bool("help-all", false, "print the help with every flag, those for test harnesses too, and exit")
	err := fs.Parse(args)
	switch {
	case errors.Is(err, flag.ErrHelp):
		c.printHelp(helpOut, fs, false)
		return flag.ErrHelp
	case err != nil:
		return c.flagError(fs, err)
	case *all:
		c.printHelp(helpOut, fs, true)
		return flag.ErrHelp
	case fs.NArg() > 0:
		msg := fmt.Sprintf("unexpected argument %q (%s takes flags only)", fs.Arg(0), c.path)
		if c.path == nodeCommand.path && !strings.HasPrefix(fs.Arg(0), "-") {
			msg = fmt.Sprintf("unknown command %q%s", fs.Arg(0), didYouMean(suggest.Names(fs.Arg(0), []string{slotTrackerCommand, "help"})))
		}
		return &usageError{msg: msg, help: c.path}
	}
	return nil
}

// flagError rewords an error of fs.Parse: which flag, and for an unknown
// one the flags nearest to it.
func (c command) flagError(fs *flag.FlagSet, err error) error {
	msg := strings.NewReplacer("flag -", "flag --", "argument: -", "argument: --", "for -", "for --").Replace(err.Error())
	if name, ok := strings.CutPrefix(msg, "flag provided but not defined: -"); ok {
		name = strings.TrimLeft(name, "-")
		msg = "unknown flag --" + name
		var names []string
		fs.VisitAll(func(f *flag.Flag) {
			if !c.hidden[f.Name] {
				names = append(names, "--"+f.Name)
			}
		})
		msg += didYouMean(suggest.Names("--"+name, names))
	}
	return &usageError{msg: msg, help: c.path}
}

// didYouMean words up to three suggestions: " (did you mean --port?)".
func didYouMean(near []string) string {
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
func (c command) printHelp(w io.Writer, fs *flag.FlagSet, all bool) {
	shown := flag.NewFlagSet(c.path, flag.ContinueOnError)
	shown.SetOutput(w)
	hidden := 0
	fs.VisitAll(func(f *flag.Flag) {
		if c.hidden[f.Name] && !all {
			hidden++
			return
		}
		shown.Var(f.Value, f.Name, f.Usage)
		shown.Lookup(f.Name).DefValue = f.DefValue // the default, not what was parsed before -h
	})
	fmt.Fprint(w, c.header)
	fmt.Fprintln(w, "\nFlags:")
	shown.PrintDefaults()
	if hidden > 0 {
		fmt.Fprintf(w, "\n%d flags for test harnesses (fault injection) are not shown: %s --help-all lists every flag.\n", hidden, c.path)
	}
}

// nodeCommand is kvselect itself.
var nodeCommand = command{path: "kvselect", hidden: testOnlyFlags, header: fmt.Sprintf("Usage:\n"+
	"  kvselect [flags]                 run a node\n"+
	"  kvselect %s [flags]    run Dynamo's standalone slot tracker API instead (kvselect help %[1]s)\n"+
	"  kvselect help [%[1]s]    this help, or the slot tracker's\n", slotTrackerCommand)}

// slotTrackerCmd is kvselect slot-tracker.
var slotTrackerCmd = command{path: "kvselect " + slotTrackerCommand, header: fmt.Sprintf("Usage: kvselect %s [flags]\n\n"+
	"Serves Dynamo's standalone slot tracker API (register, unregister, workers, add,\n"+
	"prefill_complete, free, loads, potential_loads, health) on kvselect's active-load\n"+
	"accounting, and Prometheus metrics at /metrics. State is in memory only.\n", slotTrackerCommand)}

// runHelp is "kvselect help [command]": the help of the node or of the
// slot tracker, as --help prints it.
func runHelp(args []string) error {
	switch {
	case len(args) == 0:
		_, err := parseConfig([]string{"--help"})
		return ignoreHelp(err)
	case len(args) == 1 && args[0] == slotTrackerCommand:
		_, err := parseSlotTrackerConfig([]string{"--help"})
		return ignoreHelp(err)
	}
	msg := fmt.Sprintf("help: unknown command %q (kvselect has one: %s)", strings.Join(args, " "), slotTrackerCommand)
	return &usageError{msg: msg, help: "kvselect"}
}

func ignoreHelp(err error) error {
	if errors.Is(err, flag.ErrHelp) {
		return nil
	}
	return err
}
