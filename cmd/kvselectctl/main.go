package main

import (
	"context"
	"io"
	"os"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run is the whole CLI: build the command tree over what the commands
// share, run the command args name, and turn its error into a message on
// stderr and an exit code.
func run(args []string, stdout, stderr io.Writer) int {
	e := &env{g: defaultGlobals(), ctx: context.Background(), stdout: stdout, stderr: stderr}
	root := newRootCmd(e)
	root.SetArgs(oneDashLongFlags(root, args))
	cmd, err := root.ExecuteC()
	return report(stderr, cmd, err)
}
