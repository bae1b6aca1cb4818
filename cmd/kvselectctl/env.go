package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/spf13/pflag"

	"github.com/kvselect/kvselect/client"
	"github.com/kvselect/kvselect/internal/envflag"
)

// env is what every command runs with.
type env struct {
	g              *globals
	ctx            context.Context // ends at --timeout once the command line is parsed
	cancel         context.CancelFunc
	leaderWait     *progress // reports a leader-only call's retries; stop it once that call is over
	stdout, stderr io.Writer
}

// startTimeout bounds the rest of the command, requests, retries and
// waits together, by --timeout: the whole command, not each request.
func (e *env) startTimeout() {
	if e.g.timeout > 0 { // newClient refuses any other
		e.ctx, e.cancel = context.WithTimeout(e.ctx, e.g.timeout)
	}
}

// client builds the API client from the global flags, once the command
// line has been parsed in full.
func (e *env) client() (*client.Client, error) { return newClient(e.g) }

// out is where tables and JSON go.
func (e *env) out() *printer { return &printer{w: e.stdout, json: e.g.json} }

// envPrefix names the variables that back the global flags:
// KVSELECT_ADDR for --addr.
const envPrefix = "KVSELECT"

// globals are the flags every command accepts, before or after its name.
type globals struct {
	addr      string
	token     string
	tokenFile string
	caFile    string
	json      bool
	timeout   time.Duration
}

func defaultGlobals() *globals {
	return &globals{addr: "http://127.0.0.1:8092", timeout: 10 * time.Second}
}

// register defines the global flags on fs, each usage naming its
// environment variable.
func (g *globals) register(fs *pflag.FlagSet) {
	fs.StringVar(&g.addr, "addr", g.addr, "comma-separated node base `URLs`, tried in order; a bare host:port gets http://")
	fs.StringVar(&g.tokenFile, "token-file", g.tokenFile, "`file` holding the bearer token sent on every request (its first line: a node's token file will do)")
	fs.StringVar(&g.token, "token", g.token, "bearer `token` sent on every request; prefer --token-file or the environment variable, a command line is visible to every user of the host")
	fs.StringVar(&g.caFile, "ca-file", g.caFile, "PEM `file` of the CA that signs the nodes' HTTPS certificates (default: the system's roots)")
	fs.BoolVar(&g.json, "json", g.json, "print the server's JSON (indented) instead of tables")
	fs.DurationVar(&g.timeout, "timeout", g.timeout, "bound on the whole command: its requests, the retries while the cluster elects a leader, and a step-down's wait for the next leader")
	fs.VisitAll(func(f *pflag.Flag) { f.Usage += " (env " + envflag.Name(envPrefix, f.Name) + ")" })
}

// applyEnv sets every flag of fs not given on the command line from its
// KVSELECT_<FLAG> variable: the command line wins. A bad value is a usage
// error that names the variable, the flag and the type it wants.
func applyEnv(fs *pflag.FlagSet) error {
	var errs []error
	fs.VisitAll(func(f *pflag.Flag) {
		name := envflag.Name(envPrefix, f.Name)
		v, ok := os.LookupEnv(name)
		if f.Changed || !ok {
			return
		}
		if err := f.Value.Set(v); err != nil {
			errs = append(errs, fmt.Errorf("environment variable %s=%q (for --%s): want a %s: %w", name, v, f.Name, f.Value.Type(), err))
		}
	})
	if err := errors.Join(errs...); err != nil {
		return &usageError{msg: err.Error()}
	}
	return nil
}
