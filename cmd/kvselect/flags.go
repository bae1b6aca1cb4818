package main

import (
	"flag"
	"fmt"
	"os"
	"strings"
)

// envName is the environment variable that backs a flag:
// --raft-addr ↔ KVSELECT_RAFT_ADDR.
func envName(flagName string) string {
	return "KVSELECT_" + strings.ToUpper(strings.ReplaceAll(flagName, "-", "_"))
}

// applyEnv sets every flag not given on the command line from its
// KVSELECT_* variable, then from its fallbacks (Dynamo's DYN_* names), in
// that order. Precedence: command line, KVSELECT_*, fallbacks, default.
func applyEnv(fs *flag.FlagSet, fallbacks map[string][]string) error {
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	var err error
	fs.VisitAll(func(f *flag.Flag) {
		if set[f.Name] || err != nil {
			return
		}
		for _, name := range append([]string{envName(f.Name)}, fallbacks[f.Name]...) {
			if v, ok := os.LookupEnv(name); ok {
				if serr := fs.Set(f.Name, v); serr != nil {
					err = fmt.Errorf("environment %s=%q: %w", name, v, serr)
				}
				return
			}
		}
	})
	return err
}
