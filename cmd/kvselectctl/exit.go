package main

import (
	"errors"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/kvselect/kvselect/api"
	"github.com/kvselect/kvselect/client"
)

// Exit codes.
const (
	exitOK    = 0
	exitError = 1 // the request failed, or the server said no
	exitUsage = 2 // the command line is wrong
)

// usageError is a wrong command line: exit 2.
type usageError struct {
	msg  string
	help *cobra.Command // whose --help to point to; nil: the command that failed
}

func (e *usageError) Error() string { return e.msg }

func usageErrorf(format string, args ...any) error {
	return &usageError{msg: fmt.Sprintf(format, args...)}
}

// hinted is an error with the advice report prints after it, in place of
// the default advice for its code.
type hinted struct {
	error
	hint string
}

func (h *hinted) Unwrap() error { return h.error }

// report prints err and returns the exit code for it. cmd is the command
// that failed, whose help a usage error points to.
func report(stderr io.Writer, cmd *cobra.Command, err error) int {
	var usage *usageError
	var apiErr *client.Error
	switch {
	case err == nil:
		return exitOK
	case errors.As(err, &usage):
		fmt.Fprintf(stderr, "kvselectctl: %s\n", usage.msg)
		if usage.help != nil {
			cmd = usage.help
		}
		fmt.Fprintf(stderr, "Run '%s --help' for usage.\n", cmd.CommandPath())
		return exitUsage
	case errors.As(err, &apiErr):
		fmt.Fprintf(stderr, "kvselectctl: %s: %s (HTTP %d)\n", apiErr.Code, apiErr.Message, apiErr.Status)
		var h *hinted
		switch {
		case errors.As(err, &h):
			fmt.Fprintf(stderr, "kvselectctl: %s\n", h.hint)
		case apiErr.Code == api.CodeUnknownPartition:
			fmt.Fprintln(stderr, "kvselectctl: check --model and --tenant: no worker was ever registered under those names; 'kvselectctl workers list' shows the registered ones (retrying will not help)")
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
