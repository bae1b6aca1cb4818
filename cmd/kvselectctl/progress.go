package main

import (
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/kvselect/kvselect/client"
)

// progressEvery is how often a command that waits says so; the first line
// comes once it has waited that long, so a wait that ends at once stays
// silent. Tests shorten it.
var progressEvery = time.Second

// clock is where progress reads the time and gets its ticks; tests drive
// a fake one.
type clock interface {
	Now() time.Time
	// Ticker delivers a tick every d until stop is called.
	Ticker(d time.Duration) (ticks <-chan time.Time, stop func())
}

type realClock struct{}

func (realClock) Now() time.Time { return time.Now() }

func (realClock) Ticker(d time.Duration) (<-chan time.Time, func()) {
	t := time.NewTicker(d)
	return t.C, t.Stop
}

// progressClock is the clock of every progress; tests replace it.
var progressClock clock = realClock{}

// progress tells the user, on stderr, that a command is still waiting and
// why: a leader-only call retrying while the cluster has no leader it can
// reach, or a step-down waiting for the next leader. Up to --timeout would
// otherwise pass in silence. stdout stays for the result, so --json output
// is untouched.
//
// A retry can take as long as the node holds a write waiting for an
// election (its --leader-wait, 5 s by default), so once the client has
// reported the first retry, a ticker (owned by progress, ended by stop)
// keeps the lines coming every progressEvery whatever the attempts do.
type progress struct {
	w     io.Writer
	what  string
	clock clock

	mu      sync.Mutex
	next    time.Duration // elapsed time at which the next line is due
	why     string        // of the last retry
	begin   time.Time     // when the wait began, once a retry reported it
	stopped bool
	done    chan struct{} // closed by stop; nil until the ticker runs
	wg      sync.WaitGroup
}

func newProgress(w io.Writer, what string) *progress {
	return &progress{w: w, what: what, clock: progressClock, next: progressEvery}
}

// tick reports having waited elapsed, because of why (may be empty): one
// line in each progressEvery of waiting at most, none in the first.
func (p *progress) tick(elapsed time.Duration, why string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.tickLocked(elapsed, why)
}

func (p *progress) tickLocked(elapsed time.Duration, why string) {
	if elapsed < p.next || p.stopped {
		return
	}
	if progressEvery > 0 {
		for p.next <= elapsed { // the next whole interval: a late tick does not delay the one after
			p.next += progressEvery
		}
	}
	detail := elapsed.Truncate(time.Second).String()
	if why != "" {
		detail += ", " + why
	}
	fmt.Fprintf(p.w, "kvselectctl: %s… (%s)\n", p.what, detail)
}

// retry is the client's retry hook (client.WithRetryNotify): the why is
// the code of the answer that made the client retry. The first one
// starts the ticker.
func (p *progress) retry(r client.Retry) {
	why := string(client.CodeOf(r.Err))
	if why == "" {
		why = "no answer"
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.why = why
	if p.done == nil && !p.stopped {
		p.begin = p.clock.Now().Add(-r.Elapsed)
		p.done = make(chan struct{})
		ticks, stopTicks := p.clock.Ticker(max(progressEvery, time.Millisecond))
		p.wg.Add(1)
		go p.keepTelling(ticks, stopTicks)
	}
	p.tickLocked(r.Elapsed, why)
}

// keepTelling prints a line on each tick until stop.
func (p *progress) keepTelling(ticks <-chan time.Time, stopTicks func()) {
	defer p.wg.Done()
	defer stopTicks()
	for {
		select {
		case <-p.done:
			return
		case <-ticks:
			p.mu.Lock()
			p.tickLocked(p.clock.Now().Sub(p.begin), p.why)
			p.mu.Unlock()
		}
	}
}

// stop ends the ticker and silences p: nothing is written once it
// returns. It may be called more than once.
func (p *progress) stop() {
	p.mu.Lock()
	if p.done != nil && !p.stopped {
		close(p.done)
	}
	p.stopped = true
	p.mu.Unlock()
	p.wg.Wait()
}
