package kvsim

import (
	"container/heap"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/kvselect/kvselect/internal/poll"
)

// Router chooses an engine for each request of a timed replay and hears
// of its lifecycle, as Ray's replicas do with kvselect. TimedReplay calls
// it from one goroutine, in virtual-time order.
type Router interface {
	// Route returns the fleet index of the engine that serves req. An
	// error wrapping ErrRejected counts as a refusal (kvselect's 503);
	// any other error as a failure. Either way the request is not served.
	Route(ctx context.Context, req *TimedRequest) (int, error)
	// FirstToken reports that req's prefill ended (its first token).
	FirstToken(ctx context.Context, req *TimedRequest) error
	// Finished reports that req's last token is out.
	Finished(ctx context.Context, req *TimedRequest) error
}

// Settler is a Router whose view of the fleet lags behind it (kvselect
// nodes learn of KV events and of each other's bookings asynchronously).
// In virtual time TimedReplay calls Settle before every other Router call,
// so that each call sees everything that happened before it in virtual
// time, whatever the wall-clock delays: that is what makes a run
// deterministic. Settle must wait on conditions, not on time.
type Settler interface {
	Settle(ctx context.Context) error
}

// ErrRejected is wrapped by a Router that refuses a request, as kvselect
// does with 503 when every worker is busy.
var ErrRejected = errors.New("kvsim: request rejected by the router")

// TimedOptions tune TimedReplay.
type TimedOptions struct {
	// TraceBlockTokens is the number of tokens per trace hash id (512).
	TraceBlockTokens int
	// Speed divides the trace's timestamps: 2 replays it twice as fast
	// (twice the load). 0 means 1.
	Speed float64
	// Limit caps the number of requests (0 = all).
	Limit int
	// Realtime paces the replay by the wall clock (a virtual second is a
	// real one; Settle is not called), for end-to-end runs against live
	// nodes. By default time is virtual: a discrete-event clock that
	// jumps from one event to the next.
	Realtime bool
	// Name labels the progress logs.
	Name string
	// ProgressEvery logs progress every that many finished requests (500).
	ProgressEvery int
	// Log receives progress and the first errors (default: discarded).
	Log *slog.Logger
	// Clock, when set, reads the replay's time from outside it: the
	// replay moves it to each event's time before handling the event, so
	// a router's nodes can run on it (VirtualClock). In virtual time the
	// router is settled before the clock moves on, so whatever a router
	// call set in motion (a KV event, a mirrored booking) lands at the
	// instant of the call.
	Clock *VirtualClock
}

// Outcome of one request.
const (
	OutcomeServed   = "served"
	OutcomeRejected = "rejected"
	OutcomeFailed   = "failed"
)

// RequestResult is what happened to one request.
type RequestResult struct {
	Index        int    `json:"index"`
	Outcome      string `json:"outcome"`
	Rank         int    `json:"rank"` // fleet index, -1 when not served
	InputTokens  int    `json:"input_tokens"`
	OutputTokens int    `json:"output_tokens"`
	HitTokens    int    `json:"hit_tokens"`
	// RoutedPrefixTokens is the cached prefix of the chosen engine when
	// the request was routed, BestPrefixTokens the longest of any engine
	// then: how the router traded cache hits for load.
	RoutedPrefixTokens int           `json:"routed_prefix_tokens"`
	BestPrefixTokens   int           `json:"best_prefix_tokens"`
	Arrival            time.Duration `json:"arrival_ns"`
	TTFT               time.Duration `json:"ttft_ns"`
	E2E                time.Duration `json:"e2e_ns"`
}

// TimedResult is the record of a timed replay; Figures summarises it.
type TimedResult struct {
	Requests []RequestResult `json:"-"`
	// Errors counts failed router calls (a failed route, prefill_complete
	// or free each count); the first few are in ErrorSamples.
	Errors       int      `json:"errors"`
	ErrorSamples []string `json:"error_samples,omitempty"`
	// End is when the last request finished (virtual time).
	End time.Duration `json:"end_ns"`
	// MaxActiveArea and MeanActiveArea integrate over time the largest
	// and the mean number of active requests (waiting or running) per
	// engine, in request·seconds.
	MaxActiveArea  float64 `json:"max_active_area"`
	MeanActiveArea float64 `json:"mean_active_area"`
	// FinalActive is every engine's active requests when the replay
	// ended (all zero after a complete replay).
	FinalActive []int `json:"final_active"`
	// Wall is how long the replay took in real time.
	Wall time.Duration `json:"wall_ns"`
}

// maxErrorSamples is how many errors TimedResult keeps (and logs).
const maxErrorSamples = 10

// TimedReplay replays reqs through the fleet's timed engines, each routed
// by router, and returns what happened to every request. Requests arrive
// at their timestamps divided by opts.Speed. It returns early, with an
// error, when ctx ends or a Settle fails; router call failures are counted
// in the result instead.
func TimedReplay(ctx context.Context, fleet *Fleet, reqs []TraceRequest, router Router, opts TimedOptions) (*TimedResult, error) {
	opts = opts.withDefaults()
	if opts.Limit > 0 && opts.Limit < len(reqs) {
		reqs = reqs[:opts.Limit]
	}
	r := &replay{fleet: fleet, router: router, opts: opts, reqs: reqs,
		res: &TimedResult{Requests: make([]RequestResult, len(reqs))}}
	if s, ok := router.(Settler); ok && !opts.Realtime {
		r.settler = s
	}
	start := time.Now()
	r.started = start
	r.clock = virtualClock{}
	if opts.Realtime {
		r.clock = realClock{start: start}
	}
	err := r.run(ctx)
	r.res.Wall = time.Since(start)
	for i := range fleet.engines {
		r.res.FinalActive = append(r.res.FinalActive, fleet.Active(i))
	}
	return r.res, err
}

func (opts TimedOptions) withDefaults() TimedOptions {
	if opts.TraceBlockTokens <= 0 {
		opts.TraceBlockTokens = DefaultTraceBlockTokens
	}
	if opts.Speed <= 0 {
		opts.Speed = 1
	}
	if opts.ProgressEvery <= 0 {
		opts.ProgressEvery = defaultProgressEvery
	}
	if opts.Log == nil {
		opts.Log = slog.New(slog.DiscardHandler)
	}
	return opts
}

// replay is one TimedReplay's state, owned by its goroutine.
type replay struct {
	fleet   *Fleet
	router  Router
	settler Settler
	clock   clock
	opts    TimedOptions
	reqs    []TraceRequest
	res     *TimedResult

	events   eventQueue
	seq      uint64 // insertion order: ties at one time go first in, first out
	now      time.Duration
	finished int
	started  time.Time
}

func (r *replay) run(ctx context.Context) error {
	first := 0.0
	if len(r.reqs) > 0 {
		first = r.reqs[0].Timestamp
		for _, q := range r.reqs {
			first = min(first, q.Timestamp)
		}
	}
	for i, q := range r.reqs {
		at := time.Duration((q.Timestamp - first) / r.opts.Speed * float64(time.Millisecond))
		r.push(replayEvent{at: at, kind: eventArrival, idx: i})
	}
	for r.events.Len() > 0 {
		ev := heap.Pop(&r.events).(replayEvent)
		if ev.at > r.now {
			// What this instant's calls set in motion lands at this
			// instant, on the nodes' clock too, before time moves on.
			if err := r.settle(ctx); err != nil {
				return err
			}
		}
		if err := r.clock.wait(ctx, ev.at); err != nil {
			return err
		}
		r.advance(ev.at)
		var err error
		switch ev.kind {
		case eventArrival:
			err = r.arrive(ctx, ev.idx)
		case eventStepEnd:
			err = r.stepEnd(ctx, ev.idx)
		}
		if err != nil {
			return err
		}
	}
	r.res.End = r.now
	r.opts.Log.Info("timed replay done", "router", r.opts.Name, "requests", len(r.reqs), "errors", r.res.Errors,
		"virtual", r.now.Round(time.Millisecond), "wall", time.Since(r.started).Round(time.Millisecond))
	return nil
}

// advance integrates the engines' active requests up to t, then moves the
// clock there.
func (r *replay) advance(t time.Duration) {
	if dt := (t - r.now).Seconds(); dt > 0 {
		maxActive, sum := 0, 0
		for _, e := range r.fleet.engines {
			n := e.active()
			maxActive = max(maxActive, n)
			sum += n
		}
		r.res.MaxActiveArea += float64(maxActive) * dt
		r.res.MeanActiveArea += float64(sum) / float64(len(r.fleet.engines)) * dt
	}
	r.now = max(r.now, t)
	if r.opts.Clock != nil {
		r.opts.Clock.advance(r.now)
	}
}

func (r *replay) arrive(ctx context.Context, i int) error {
	q := r.reqs[i]
	tokens := TraceTokens(q, r.opts.TraceBlockTokens)
	req := &TimedRequest{Index: i, Arrival: r.now, Tokens: tokens, OutputLength: max(q.OutputLength, 1), Rank: -1,
		chain: engineHashes(tokens, r.fleet.cfg.BlockSize)}
	r.res.Requests[i] = RequestResult{Index: i, Rank: -1, InputTokens: len(tokens), OutputTokens: req.OutputLength, Arrival: r.now}
	if err := r.settle(ctx); err != nil {
		return err
	}
	rank, err := r.router.Route(ctx, req)
	if err == nil && (rank < 0 || rank >= r.fleet.Len()) {
		err = fmt.Errorf("router chose engine %d of %d", rank, r.fleet.Len())
	}
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		r.res.Requests[i].Outcome = OutcomeFailed
		if errors.Is(err, ErrRejected) {
			r.res.Requests[i].Outcome = OutcomeRejected
		} else {
			r.fail(fmt.Errorf("route request %d: %w", i, err))
		}
		r.finished++
		return nil
	}
	req.Rank = rank
	r.notePrefixes(req)
	e := r.fleet.engines[rank]
	e.submit(req)
	if !e.stepping {
		r.startStep(rank)
	}
	return nil
}

// notePrefixes records the routed engine's cached prefix and the
// longest in the fleet at routing time (a look that touches no cache).
func (r *replay) notePrefixes(req *TimedRequest) {
	best := 0
	for i := range r.fleet.Len() {
		best = max(best, r.fleet.CachedPrefix(i, req))
	}
	bs, isl := r.fleet.cfg.BlockSize, len(req.Tokens)
	res := &r.res.Requests[req.Index]
	res.RoutedPrefixTokens = min(r.fleet.CachedPrefix(req.Rank, req)*bs, isl)
	res.BestPrefixTokens = min(best*bs, isl)
}

func (r *replay) startStep(rank int) {
	if d, ok := r.fleet.engines[rank].startStep(r.now); ok {
		r.push(replayEvent{at: r.now + d, kind: eventStepEnd, idx: rank})
	}
}

func (r *replay) stepEnd(ctx context.Context, rank int) error {
	outcomes, err := r.fleet.engines[rank].finishStep(r.now)
	if err != nil {
		return fmt.Errorf("engine %d: %w", rank, err)
	}
	for _, o := range outcomes {
		if o.firstToken {
			if err := r.lifecycle(ctx, o.req, r.router.FirstToken, "prefill complete"); err != nil {
				return err
			}
		}
		if o.finished {
			if err := r.lifecycle(ctx, o.req, r.router.Finished, "finish"); err != nil {
				return err
			}
			r.record(o.req)
		}
	}
	r.startStep(rank)
	return nil
}

// lifecycle reports one event of req to the router, after a settle.
func (r *replay) lifecycle(ctx context.Context, req *TimedRequest, call func(context.Context, *TimedRequest) error, what string) error {
	if err := r.settle(ctx); err != nil {
		return err
	}
	if err := call(ctx, req); err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		r.fail(fmt.Errorf("%s of request %d: %w", what, req.Index, err))
	}
	return nil
}

func (r *replay) settle(ctx context.Context) error {
	if r.settler == nil {
		return nil
	}
	if err := r.settler.Settle(ctx); err != nil {
		return fmt.Errorf("kvsim: settle at %s: %w", r.now, err)
	}
	return nil
}

// record keeps a finished request's figures and lets its prompt go.
func (r *replay) record(req *TimedRequest) {
	res := &r.res.Requests[req.Index]
	res.Outcome = OutcomeServed
	res.Rank = req.Rank
	res.HitTokens = req.HitTokens
	res.TTFT = req.FirstToken - req.Arrival
	res.E2E = req.Done - req.Arrival
	req.Tokens, req.chain = nil, nil
	r.finished++
	if r.finished%r.opts.ProgressEvery == 0 {
		r.opts.Log.Info("timed replay progress", "router", r.opts.Name, "done", r.finished, "total", len(r.reqs),
			"virtual", r.now.Round(time.Millisecond), "errors", r.res.Errors)
	}
}

func (r *replay) fail(err error) {
	r.res.Errors++
	if len(r.res.ErrorSamples) < maxErrorSamples {
		r.res.ErrorSamples = append(r.res.ErrorSamples, err.Error())
		r.opts.Log.Warn("timed replay error", "router", r.opts.Name, "err", err)
	}
}

func (r *replay) push(ev replayEvent) {
	ev.seq = r.seq
	r.seq++
	heap.Push(&r.events, ev)
}

// Event kinds of the replay's queue.
const (
	eventArrival = iota
	eventStepEnd
)

// replayEvent is an arrival (idx: the request) or the end of an engine step
// (idx: the engine).
type replayEvent struct {
	at   time.Duration
	seq  uint64
	kind int
	idx  int
}

// eventQueue is a min-heap by (time, insertion order).
type eventQueue []replayEvent

func (q eventQueue) Len() int { return len(q) }
func (q eventQueue) Less(i, j int) bool {
	if q[i].at != q[j].at {
		return q[i].at < q[j].at
	}
	return q[i].seq < q[j].seq
}
func (q eventQueue) Swap(i, j int) { q[i], q[j] = q[j], q[i] }
func (q *eventQueue) Push(x any)   { *q = append(*q, x.(replayEvent)) }
func (q *eventQueue) Pop() any {
	old := *q
	ev := old[len(old)-1]
	*q = old[:len(old)-1]
	return ev
}

// clock moves a replay to an event's time.
type clock interface {
	wait(ctx context.Context, at time.Duration) error
}

// virtualClock jumps: a run is as fast as its work and the same every time.
type virtualClock struct{}

func (virtualClock) wait(ctx context.Context, _ time.Duration) error { return ctx.Err() }

// realClock sleeps until the event is due by the wall clock.
type realClock struct{ start time.Time }

func (c realClock) wait(ctx context.Context, at time.Duration) error {
	d := time.Until(c.start.Add(at))
	if d <= 0 {
		return ctx.Err()
	}
	return poll.Sleep(ctx, d)
}

// sortedRanks returns the indexes of engines with the lowest key, in
// index order (the candidates a router breaks its tie among).
func sortedRanks(n int, key func(i int) int) []int {
	best := []int{}
	for i := range n {
		k := key(i)
		switch {
		case len(best) == 0 || k < key(best[0]):
			best = append(best[:0], i)
		case k == key(best[0]):
			best = append(best, i)
		}
	}
	return slices.Clip(best)
}
