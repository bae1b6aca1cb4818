package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/kvselect/kvselect/client"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run is the whole CLI: build the command tree over what the commands
// share, run the command args name, and turn its error into a message on
// stderr and an exit code.
func run(args []string, stdout, stderr io.Writer) int {
	e := &env{g: defaultGlobals(), stdout: stdout, stderr: stderr}
	// A leader-only call that retries while the cluster elects a leader
	// says so on stderr.
	waiting := newProgress(stderr, "waiting for a leader")
	e.leaderWait = waiting
	e.ctx = client.WithRetryNotify(context.Background(), waiting.retry)
	root := newRootCmd(e)
	args = oneDashLongFlags(root, args)
	if err := misspeltCommand(root, args); err != nil {
		return report(stderr, root, err)
	}
	root.SetArgs(args)
	cmd, err := root.ExecuteC()
	waiting.stop()
	if e.cancel != nil {
		e.cancel()
	}
	if errors.Is(err, context.DeadlineExceeded) {
		err = fmt.Errorf("no answer within --timeout %v: %w", e.g.timeout, err)
	}
	return report(stderr, cmd, err)
}
