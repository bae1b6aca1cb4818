package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/kvselect/kvselect/api"
	"github.com/kvselect/kvselect/client"
	"github.com/kvselect/kvselect/internal/envflag"
	"github.com/kvselect/kvselect/internal/version"
)

// Exit codes.
const (
	exitOK    = 0
	exitError = 1 // the request failed, or the server said no
	exitUsage = 2 // the command line is wrong
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run is the whole CLI: parse the global flags, find the command, run it
// and turn its error into a message and an exit code.
func run(args []string, stdout, stderr io.Writer) int {
	g := defaultGlobals()
	fs := flag.NewFlagSet("kvselectctl", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { printUsage(stderr, fs) }
	g.register(fs)
	envVars.Annotate(fs)
	showVersion := fs.Bool("version", false, "print the version, commit and Go version, and exit")
	if err := fs.Parse(args); err != nil {
		return report(stderr, flagError(err))
	}
	if *showVersion {
		fmt.Fprintln(stdout, "kvselectctl", version.Get())
		return exitOK
	}
	if err := envVars.Apply(fs); err != nil {
		return report(stderr, usageErrorf("%v", err))
	}
	cmd, rest, err := findCommand(fs.Args())
	if err != nil {
		return report(stderr, err)
	}
	e := &env{g: g, cmd: cmd, ctx: context.Background(), stdout: stdout, stderr: stderr}
	return report(stderr, cmd.run(e, rest))
}

// envVars backs the global flags with KVSELECT_<FLAG> variables.
var envVars = envflag.Env{Prefix: "KVSELECT"}

// globals are the flags every command accepts, before or after its name.
type globals struct {
	addr      string
	tokenFile string
	json      bool
	timeout   time.Duration
}

func defaultGlobals() *globals {
	return &globals{addr: "http://127.0.0.1:8092", timeout: 10 * time.Second}
}

// register defines the global flags on fs, with the current values as
// defaults, so that a command's flag set can take them too.
func (g *globals) register(fs *flag.FlagSet) {
	fs.StringVar(&g.addr, "addr", g.addr, "comma-separated node base `URLs`, tried in order; a bare host:port gets http://")
	fs.StringVar(&g.tokenFile, "token-file", g.tokenFile, "`file` holding the bearer token sent on every request")
	fs.BoolVar(&g.json, "json", g.json, "print the server's JSON (indented) instead of tables")
	fs.DurationVar(&g.timeout, "timeout", g.timeout, "per-request timeout; also bounds retries while the cluster elects a leader")
}

// isGlobal reports whether a flag name is one of the global flags.
func isGlobal(name string) bool {
	switch name {
	case "addr", "token-file", "json", "timeout":
		return true
	}
	return false
}

// env is what a command runs with.
type env struct {
	g              *globals
	cmd            command
	ctx            context.Context
	stdout, stderr io.Writer
}

// client builds the API client from the global flags, once the command
// line has been parsed in full.
func (e *env) client() (*client.Client, error) { return newClient(e.g) }

// out is where tables and JSON go.
func (e *env) out() *printer { return &printer{w: e.stdout, json: e.g.json} }

// flags returns a flag set for the current command; the command adds its
// own flags, then calls parse.
func (e *env) flags() *flag.FlagSet {
	fs := flag.NewFlagSet(e.cmd.name, flag.ContinueOnError)
	fs.SetOutput(e.stderr)
	fs.Usage = func() { printCommandUsage(e.stderr, e.cmd, fs) }
	return fs
}

// parse adds the global flags to fs and parses args, letting flags and
// positional arguments mix; it checks the number of positional ones.
func (e *env) parse(fs *flag.FlagSet, args []string, minArgs, maxArgs int) ([]string, error) {
	e.g.register(fs)
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return nil, flagError(err)
	}
	if len(pos) < minArgs || len(pos) > maxArgs {
		return nil, usageErrorf("%s: wrong number of arguments\nusage: kvselectctl %s", e.cmd.name, e.cmd.synopsis())
	}
	return pos, nil
}

// parseInterspersed parses flags anywhere in args (as in
// "workers rm 3 --json") and returns the positional arguments. Everything
// after "--" is positional.
func parseInterspersed(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		rest := fs.Args()
		if len(rest) == 0 {
			return pos, nil
		}
		if consumed := len(args) - len(rest); consumed > 0 && args[consumed-1] == "--" {
			return append(pos, rest...), nil
		}
		pos, args = append(pos, rest[0]), rest[1:]
	}
}

// usageError is a wrong command line: exit 2.
type usageError struct {
	msg     string
	printed bool // the flag package already told the user
}

func (e *usageError) Error() string { return e.msg }

func usageErrorf(format string, args ...any) error {
	return &usageError{msg: fmt.Sprintf(format, args...)}
}

// flagError wraps an error from flag parsing, which the flag package has
// already printed along with the usage.
func flagError(err error) error {
	if errors.Is(err, flag.ErrHelp) {
		return err
	}
	return &usageError{msg: err.Error(), printed: true}
}

// report prints err and returns the exit code for it.
func report(stderr io.Writer, err error) int {
	var usage *usageError
	var apiErr *client.Error
	switch {
	case err == nil:
		return exitOK
	case errors.Is(err, flag.ErrHelp):
		return exitOK
	case errors.As(err, &usage):
		if !usage.printed {
			fmt.Fprintf(stderr, "kvselectctl: %s\n", usage.msg)
			fmt.Fprintln(stderr, "Run 'kvselectctl -h' for usage.")
		}
		return exitUsage
	case errors.As(err, &apiErr):
		fmt.Fprintf(stderr, "kvselectctl: %s: %s (HTTP %d)\n", apiErr.Code, apiErr.Message, apiErr.Status)
		switch {
		case apiErr.Code == api.CodeUnknownOutcome:
			fmt.Fprintln(stderr, "kvselectctl: the write may or may not have been applied; catalog writes are idempotent, so it is safe to run the command again")
		case apiErr.AfterUnknownOutcome:
			fmt.Fprintln(stderr, "kvselectctl: this answered a retry after an unknown outcome: the first attempt has probably been applied")
		}
		return exitError
	default:
		fmt.Fprintf(stderr, "kvselectctl: %v\n", err)
		return exitError
	}
}
