package main

import (
	"errors"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
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

// flagSuggestions are the flags of fs within two edits of typed, or that
// start with it.
func flagSuggestions(fs *pflag.FlagSet, typed string) []string {
	var out []string
	if len(typed) < 2 {
		return nil // a shorthand
	}
	fs.VisitAll(func(f *pflag.Flag) {
		if !f.Hidden && (editDistance(typed, f.Name) <= 2 || strings.HasPrefix(f.Name, typed)) {
			out = append(out, "--"+f.Name)
		}
	})
	return out
}

// editDistance is the Levenshtein distance between a and b.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur := make([]int, len(b)+1)
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev = cur
	}
	return prev[len(b)]
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
