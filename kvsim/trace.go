package kvsim

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/kvselect/kvselect/api"
	"github.com/kvselect/kvselect/client"
	"github.com/kvselect/kvselect/internal/poll"
)

// Trace limits and defaults.
const (
	// DefaultTraceBlockTokens is the number of tokens each Mooncake hash id
	// stands for.
	DefaultTraceBlockTokens = 512
	// MaxTraceInputLength bounds a request's input_length, so that one bad
	// line cannot allocate without limit.
	MaxTraceInputLength = 1 << 24
	// maxTraceLine bounds one JSON line of a trace.
	maxTraceLine = 64 << 20
	// traceVocabulary bounds the synthetic token ids (a typical vocabulary).
	traceVocabulary = 150000
	// defaultProgressEvery is how often ReplayTrace logs progress.
	defaultProgressEvery = 500
	// loggedErrors is how many replay errors are logged one by one.
	loggedErrors = 10
)

// TraceRequest is one line of a Mooncake trace.
type TraceRequest struct {
	Timestamp    float64  `json:"timestamp"` // milliseconds since the trace started
	InputLength  int      `json:"input_length"`
	OutputLength int      `json:"output_length"`
	HashIDs      []uint64 `json:"hash_ids"` // one id per block of trace tokens
}

// ReadTrace reads a JSON-lines trace. Blank lines are skipped; a malformed
// line is an error naming its line number.
func ReadTrace(r io.Reader) ([]TraceRequest, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), maxTraceLine)
	var reqs []TraceRequest
	for line := 1; sc.Scan(); line++ {
		text := bytes.TrimSpace(sc.Bytes())
		if len(text) == 0 {
			continue
		}
		var req TraceRequest
		if err := json.Unmarshal(text, &req); err != nil {
			return nil, fmt.Errorf("kvsim: trace line %d: %w", line, err)
		}
		if err := req.validate(); err != nil {
			return nil, fmt.Errorf("kvsim: trace line %d: %w", line, err)
		}
		reqs = append(reqs, req)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("kvsim: read trace after line %d: %w", len(reqs), err)
	}
	return reqs, nil
}

func (req TraceRequest) validate() error {
	switch {
	case req.InputLength < 0 || req.InputLength > MaxTraceInputLength:
		return fmt.Errorf("input_length must be in [0, %d], got %d", MaxTraceInputLength, req.InputLength)
	case req.OutputLength < 0:
		return fmt.Errorf("output_length must not be negative, got %d", req.OutputLength)
	}
	return nil
}

// TraceTokens turns a trace request into deterministic token ids: hash id h
// yields traceBlockTokens tokens derived from h alone, so requests sharing
// hash ids share token blocks. The concatenation is truncated to
// InputLength (at most MaxTraceInputLength). traceBlockTokens <= 0 means
// DefaultTraceBlockTokens.
func TraceTokens(req TraceRequest, traceBlockTokens int) []uint32 {
	if traceBlockTokens <= 0 {
		traceBlockTokens = DefaultTraceBlockTokens
	}
	n := min(max(req.InputLength, 0), MaxTraceInputLength)
	if avail := len(req.HashIDs); avail < (n+traceBlockTokens-1)/traceBlockTokens {
		n = avail * traceBlockTokens
	}
	tokens := make([]uint32, n)
	for i := range tokens {
		h := req.HashIDs[i/traceBlockTokens]
		j := uint64(i % traceBlockTokens)
		tokens[i] = uint32(splitmix64(h*uint64(traceBlockTokens)+j) % traceVocabulary)
	}
	return tokens
}

// splitmix64 is a well-mixed bijection on 64-bit integers.
func splitmix64(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}

// ReplayOptions tune ReplayTrace.
type ReplayOptions struct {
	// TraceBlockTokens is the number of tokens per trace hash id (512).
	TraceBlockTokens int
	// SelectURL, when set, is a kvselect node: each request goes to the
	// worker and rank its POST /select returns. Otherwise requests go
	// round-robin over every (worker, rank).
	SelectURL string
	// Client, when set, makes the selection calls instead of a client for
	// SelectURL.
	Client *client.Client
	// Limit caps the number of requests replayed (0 = all).
	Limit int
	// Speed paces requests by their timestamps: 1 is real time, 2 twice
	// as fast. 0 ignores timestamps and replays as fast as possible.
	Speed float64
	// ProgressEvery logs progress every that many requests (500).
	ProgressEvery int
	// Log receives progress and errors (default: the Sim's logger).
	Log *slog.Logger
}

// ReplayStats summarises a trace replay. Hit blocks are the leading
// prompt blocks already cached on the rank that served the request.
type ReplayStats struct {
	Requests     int     `json:"requests"` // requests attempted, including failed ones
	PromptBlocks int     `json:"prompt_blocks"`
	HitBlocks    int     `json:"hit_blocks"`
	HitRate      float64 `json:"hit_rate"` // HitBlocks / PromptBlocks
	Errors       int     `json:"errors"`   // requests not served (selection or serve failure)
}

// String formats the stats as one line.
func (st ReplayStats) String() string {
	return fmt.Sprintf("requests=%d prompt_blocks=%d hit_blocks=%d hit_rate=%.4f errors=%d",
		st.Requests, st.PromptBlocks, st.HitBlocks, st.HitRate, st.Errors)
}

func (st *ReplayStats) record(res ServeResult) {
	st.PromptBlocks += res.Blocks
	st.HitBlocks += res.CachedBlocks
	if st.PromptBlocks > 0 {
		st.HitRate = float64(st.HitBlocks) / float64(st.PromptBlocks)
	}
}

// target is one (worker, rank) a request can be served on.
type target struct {
	worker *Worker
	rank   int
}

// ReplayTrace serves the requests on sim's workers, choosing each
// request's worker and rank by kvselect (opts.SelectURL) or round-robin.
// A request that cannot be selected or served is counted in Errors and
// skipped. It returns early, with the stats so far, when ctx ends.
func ReplayTrace(ctx context.Context, sim *Sim, reqs []TraceRequest, opts ReplayOptions) (ReplayStats, error) {
	opts = opts.withDefaults(sim)
	if opts.Limit > 0 && opts.Limit < len(reqs) {
		reqs = reqs[:opts.Limit]
	}
	choose := roundRobin(sim)
	if opts.Client == nil && opts.SelectURL != "" {
		c, err := sim.newClient(opts.SelectURL)
		if err != nil {
			return ReplayStats{}, fmt.Errorf("kvsim: %w", err)
		}
		opts.Client = c
	}
	if opts.Client != nil {
		choose = selectByKvselect(sim, opts.Client)
	}
	var st ReplayStats
	start := time.Now()
	for i, req := range reqs {
		if err := pace(ctx, start, reqs[0].Timestamp, req.Timestamp, opts.Speed); err != nil {
			return st, err
		}
		st.Requests++
		tokens := TraceTokens(req, opts.TraceBlockTokens)
		if err := serveOne(ctx, choose, tokens, &st); err != nil {
			if ctx.Err() != nil {
				return st, ctx.Err()
			}
			st.Errors++
			if st.Errors <= loggedErrors {
				opts.Log.Warn("trace request failed", "request", i, "err", err)
			}
		}
		if (i+1)%opts.ProgressEvery == 0 {
			opts.Log.Info("trace replay progress", "done", i+1, "total", len(reqs),
				"hit_rate", st.HitRate, "errors", st.Errors, "elapsed", time.Since(start).Round(time.Millisecond))
		}
	}
	opts.Log.Info("trace replay done", "requests", st.Requests, "hit_rate", st.HitRate,
		"errors", st.Errors, "elapsed", time.Since(start).Round(time.Millisecond))
	return st, nil
}

func (opts ReplayOptions) withDefaults(sim *Sim) ReplayOptions {
	if opts.TraceBlockTokens <= 0 {
		opts.TraceBlockTokens = DefaultTraceBlockTokens
	}
	if opts.ProgressEvery <= 0 {
		opts.ProgressEvery = defaultProgressEvery
	}
	if opts.Log == nil {
		opts.Log = sim.cfg.Log
	}
	return opts
}

func serveOne(ctx context.Context, choose chooser, tokens []uint32, st *ReplayStats) error {
	t, err := choose(ctx, tokens)
	if err != nil {
		return err
	}
	res, err := t.worker.Serve(t.rank, tokens)
	if err != nil {
		return err
	}
	st.record(res)
	return nil
}

// pace waits until a request's time offset from the first, divided by
// speed, has elapsed since start. speed <= 0 never waits.
func pace(ctx context.Context, start time.Time, first, ts, speed float64) error {
	if speed <= 0 {
		return ctx.Err()
	}
	due := start.Add(time.Duration((ts - first) / speed * float64(time.Millisecond)))
	wait := time.Until(due)
	if wait <= 0 {
		return ctx.Err()
	}
	return poll.Sleep(ctx, wait)
}

// chooser picks where a prompt is served.
type chooser func(ctx context.Context, tokens []uint32) (target, error)

func roundRobin(sim *Sim) chooser {
	var targets []target
	for _, w := range sim.workers {
		for rank := range w.ranks {
			targets = append(targets, target{worker: w, rank: rank})
		}
	}
	next := 0
	return func(context.Context, []uint32) (target, error) {
		t := targets[next]
		next = (next + 1) % len(targets)
		return t, nil
	}
}

// errBadSelection is wrapped when kvselect picks a worker or rank this Sim
// does not have.
var errBadSelection = errors.New("kvsim: selection names no simulated worker rank")

func selectByKvselect(sim *Sim, c *client.Client) chooser {
	return func(ctx context.Context, tokens []uint32) (target, error) {
		sel, err := c.Select(ctx, api.SelectRequest{Prompt: api.Prompt{
			ModelName: sim.cfg.Model, TenantID: sim.cfg.Tenant, TokenIDs: tokens}})
		if err != nil {
			return target{}, fmt.Errorf("select: %w", err)
		}
		w := sim.Worker(sel.WorkerID)
		if w == nil || int(sel.DPRank) >= len(w.ranks) {
			return target{}, fmt.Errorf("%w: worker %d dp_rank %d", errBadSelection, sel.WorkerID, sel.DPRank)
		}
		return target{worker: w, rank: int(sel.DPRank)}, nil
	}
}
