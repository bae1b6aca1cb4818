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

// Apply sets every flag of fs not given on the command line from its
// <prefix>_* variable, then from its fallbacks (other names for the same
// setting, such as Dynamo's DYN_*), in that order. Precedence: command
// line, <prefix>_*, fallbacks, default. Call it after fs.Parse.
func Apply(fs *flag.FlagSet, prefix string, fallbacks map[string][]string) error {
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	var errs []error
	fs.VisitAll(func(f *flag.Flag) {
		if set[f.Name] {
			return
		}
		for _, name := range append([]string{Name(prefix, f.Name)}, fallbacks[f.Name]...) {
			if v, ok := os.LookupEnv(name); ok {
				if err := fs.Set(f.Name, v); err != nil {
					errs = append(errs, fmt.Errorf("environment %s=%q: %w", name, v, err))
				}
				return
			}
		}
	})
	return errors.Join(errs...)
}
