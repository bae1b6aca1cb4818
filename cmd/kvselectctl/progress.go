package main

import (
	"fmt"
	"io"
	"time"

	"github.com/kvselect/kvselect/client"
)

// progressEvery is how often a command that waits says so; the first line
// comes once it has waited that long, so a wait that ends at once stays
// silent. Tests shorten it.
var progressEvery = time.Second

// progress tells the user, on stderr, that a command is still waiting and
// why: a leader-only call retrying while the cluster has no leader it can
// reach, or a step-down waiting for the next leader. Up to --timeout would
// otherwise pass in silence. stdout stays for the result, so --json output
// is untouched.
type progress struct {
	w    io.Writer
	what string
	next time.Duration // elapsed time at which the next line is due
}

func newProgress(w io.Writer, what string) *progress {
	return &progress{w: w, what: what, next: progressEvery}
}

// tick reports having waited elapsed, because of why (may be empty): a
// line at most every progressEvery.
func (p *progress) tick(elapsed time.Duration, why string) {
	if elapsed < p.next {
		return
	}
	p.next = elapsed + progressEvery
	detail := elapsed.Truncate(time.Second).String()
	if why != "" {
		detail += ", " + why
	}
	fmt.Fprintf(p.w, "kvselectctl: %s… (%s)\n", p.what, detail)
}

// retry is the client's retry hook (client.WithRetryNotify): the why is
// the code of the answer that made the client retry.
func (p *progress) retry(r client.Retry) {
	why := string(client.CodeOf(r.Err))
	if why == "" {
		why = "no answer"
	}
	p.tick(r.Elapsed, why)
}
