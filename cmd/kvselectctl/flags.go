package main

import (
	"errors"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/kvselect/kvselect/internal/suggest"
)

// flagError makes a flag the command does not know, or a bad flag value,
// a usage error; an unknown flag comes with the command's flags nearest
// to it (cobra suggests commands, not flags).
func flagError(cmd *cobra.Command, err error) error {
	msg := err.Error()
	var unknown *pflag.NotExistError
	if errors.As(err, &unknown) {
		msg += didYouMean(flagSuggestions(cmd.Flags(), unknown.GetSpecifiedName()))
	}
	return &usageError{msg: msg}
}

// flagSuggestions are the visible flags of fs within two edits of typed,
// or that start with it.
func flagSuggestions(fs *pflag.FlagSet, typed string) []string {
	var names []string
	fs.VisitAll(func(f *pflag.Flag) {
		if !f.Hidden {
			names = append(names, f.Name)
		}
	})
	out := suggest.Names(typed, names)
	for i, n := range out {
		out[i] = "--" + n
	}
	return out
}

// oneDashLongFlags rewrites -name and -name=value to --name... when name
// is a long flag of some command. Go's flag package, which kvselectctl
// used before cobra, took one dash as well as two, and scripts may say
// -addr or -json; pflag would read -json as -j -s -o -n. Everything
// after "--" is left alone.
func oneDashLongFlags(root *cobra.Command, args []string) []string {
	names := map[string]bool{"help": true} // cobra adds --help as a command runs
	var collect func(c *cobra.Command)
	collect = func(c *cobra.Command) {
		c.Flags().VisitAll(func(f *pflag.Flag) { names[f.Name] = true })
		c.PersistentFlags().VisitAll(func(f *pflag.Flag) { names[f.Name] = true })
		for _, sub := range c.Commands() {
			collect(sub)
		}
	}
	collect(root)
	out := make([]string, 0, len(args))
	for i, arg := range args {
		if arg == "--" {
			return append(out, args[i:]...)
		}
		if rest, ok := strings.CutPrefix(arg, "-"); ok && !strings.HasPrefix(rest, "-") {
			if name, _, _ := strings.Cut(rest, "="); len(name) > 1 && names[name] {
				arg = "-" + arg
			}
		}
		out = append(out, arg)
	}
	return out
}

// linearizableFlag adds --linearizable, the reads' one consistency
// switch, to fs: p is true when the read goes to the leader.
func linearizableFlag(fs *pflag.FlagSet, p *bool) {
	fs.BoolVar(p, "linearizable", false, "read from the leader after confirming its leadership (consistency=linearizable)")
}
