package envflag

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"
)

// Name is the environment variable that backs a flag: Name("KVSELECT",
// "raft-addr") is KVSELECT_RAFT_ADDR.
func Name(prefix, flagName string) string {
	return prefix + "_" + strings.ToUpper(strings.ReplaceAll(flagName, "-", "_"))
}

// Env says which environment variables back the flags of a flag set: each
// flag's own <Prefix>_<FLAG>, then its Fallbacks (other names for the same
// setting, such as Dynamo's DYN_*), in that order.
type Env struct {
	Prefix    string
	Fallbacks map[string][]string
}

// names lists the variables of one flag, in order of precedence.
func (e Env) names(flagName string) []string {
	return append([]string{Name(e.Prefix, flagName)}, e.Fallbacks[flagName]...)
}

// Annotate adds each flag's variables to its usage text, so that -h lists
// them. Call it after defining the flags.
func (e Env) Annotate(fs *flag.FlagSet) {
	fs.VisitAll(func(f *flag.Flag) {
		f.Usage += " (env " + strings.Join(e.names(f.Name), ", ") + ")"
	})
}

// Apply sets every flag of fs not given on the command line from its
// variables. Precedence: command line, <Prefix>_*, fallbacks, default.
// Call it after fs.Parse. An invalid value is an error that names the
// variable, the flag and the type the flag wants.
func (e Env) Apply(fs *flag.FlagSet) error {
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	var errs []error
	fs.VisitAll(func(f *flag.Flag) {
		if set[f.Name] {
			return
		}
		for _, name := range e.names(f.Name) {
			if v, ok := os.LookupEnv(name); ok {
				if err := fs.Set(f.Name, v); err != nil {
					errs = append(errs, fmt.Errorf("environment variable %s=%q (for --%s): want %s: %w",
						name, v, f.Name, want(f.Value), err))
				}
				return
			}
		}
	})
	return errors.Join(errs...)
}

// Apply is Env{prefix, fallbacks}.Apply(fs).
func Apply(fs *flag.FlagSet, prefix string, fallbacks map[string][]string) error {
	return Env{Prefix: prefix, Fallbacks: fallbacks}.Apply(fs)
}

// want words the values a flag takes, from its type.
func want(v flag.Value) string {
	switch fmt.Sprintf("%T", v) {
	case "*flag.boolValue":
		return "true or false"
	case "*flag.intValue", "*flag.int64Value":
		return "an integer"
	case "*flag.uintValue", "*flag.uint64Value":
		return "a non-negative integer"
	case "*flag.float64Value":
		return "a number"
	case "*flag.durationValue":
		return "a duration such as 500ms or 1m30s"
	}
	return "a valid value"
}
