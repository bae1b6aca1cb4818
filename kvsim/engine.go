package kvsim

import (
	"cmp"
	"fmt"
	"time"
)

// EngineConfig is the timed model of one engine rank, the role Dynamo's
// mocker plays for its router: a scheduler with a token budget per step,
// a cap on running requests and a FIFO waiting queue, over the rank's LRU
// block cache. Zero fields take the defaults below.
//
// The defaults are loosely calibrated to a small dense model (8B class)
// on one H100-class GPU, after the polynomial timing model of Dynamo's
// mocker (lib/mocker, perf_model.rs): its prefill step costs
// 4.2e-7·x² + 1.52e-2·x + 16.5 ms for x new tokens, which is about 170 ms,
// or 19 µs a token past a fixed cost, for a full 8192-token chunk; its
// decode step costs 5.7 ms on an empty cache rising to 34 ms on a full
// one, which a linear 6 ms + 0.1 ms per running request approximates up
// to 256 requests. The budget (8192) and the cap (256) are the mocker's
// and vLLM's max_num_batched_tokens and max_num_seqs defaults.
type EngineConfig struct {
	// BlockSize is the KV block size in tokens.
	BlockSize int
	// CacheBlocks is the rank's KV cache in blocks, evicted LRU.
	CacheBlocks int
	// MaxBatchTokens is the token budget of one scheduling step: one per
	// decoding request, the rest for prefill chunks (chunked prefill).
	MaxBatchTokens int
	// MaxRunning caps the requests admitted to the running batch; the
	// others wait in arrival order.
	MaxRunning int
	// PrefillPerToken is the compute time of one uncached prompt token.
	PrefillPerToken time.Duration
	// DecodePerToken is the compute time of one output token (each
	// decoding request makes one per step).
	DecodePerToken time.Duration
	// StepOverhead is the fixed cost of every step.
	StepOverhead time.Duration
}

// Engine model defaults (see EngineConfig).
const (
	DefaultMaxBatchTokens  = 8192
	DefaultMaxRunning      = 256
	DefaultPrefillPerToken = 19 * time.Microsecond
	DefaultDecodePerToken  = 100 * time.Microsecond
	DefaultStepOverhead    = 6 * time.Millisecond
)

// WithDefaults returns cfg with zero fields set to their defaults.
func (cfg EngineConfig) WithDefaults() EngineConfig {
	cfg.BlockSize = cmp.Or(cfg.BlockSize, DefaultBlockSize)
	cfg.CacheBlocks = cmp.Or(cfg.CacheBlocks, DefaultCacheBlocks)
	cfg.MaxBatchTokens = cmp.Or(cfg.MaxBatchTokens, DefaultMaxBatchTokens)
	cfg.MaxRunning = cmp.Or(cfg.MaxRunning, DefaultMaxRunning)
	cfg.PrefillPerToken = cmp.Or(cfg.PrefillPerToken, DefaultPrefillPerToken)
	cfg.DecodePerToken = cmp.Or(cfg.DecodePerToken, DefaultDecodePerToken)
	cfg.StepOverhead = cmp.Or(cfg.StepOverhead, DefaultStepOverhead)
	return cfg
}

// Validate checks a configuration that has its defaults. A step must make
// progress, so it must cost time and fit every running request's decode
// token in its budget.
func (cfg EngineConfig) Validate() error {
	switch {
	case cfg.BlockSize < 1 || cfg.BlockSize > MaxBlockSize:
		return fmt.Errorf("%w: block size must be in [1, %d], got %d", ErrInvalidConfig, MaxBlockSize, cfg.BlockSize)
	case cfg.CacheBlocks < 1 || cfg.CacheBlocks > MaxCacheBlocks:
		return fmt.Errorf("%w: cache blocks must be in [1, %d], got %d", ErrInvalidConfig, MaxCacheBlocks, cfg.CacheBlocks)
	case cfg.MaxRunning < 1:
		return fmt.Errorf("%w: max running requests must be at least 1, got %d", ErrInvalidConfig, cfg.MaxRunning)
	case cfg.MaxBatchTokens < cfg.MaxRunning:
		return fmt.Errorf("%w: max batch tokens (%d) must be at least max running requests (%d): every running request decodes one token a step",
			ErrInvalidConfig, cfg.MaxBatchTokens, cfg.MaxRunning)
	case cfg.PrefillPerToken < 0 || cfg.DecodePerToken < 0 || cfg.StepOverhead < 0:
		return fmt.Errorf("%w: engine costs must not be negative", ErrInvalidConfig)
	case cfg.StepOverhead == 0 && (cfg.PrefillPerToken == 0 || cfg.DecodePerToken == 0):
		return fmt.Errorf("%w: a step must cost time: give a step overhead or both per-token costs", ErrInvalidConfig)
	}
	return nil
}

// engineJob is a request on an engine.
type engineJob struct {
	req       *TimedRequest
	remaining int  // prompt tokens still to compute
	chunk     int  // prompt tokens computed in the current step
	decoding  bool // the prefill ended before the current step
	generated int  // output tokens so far
}

// engine is one rank's timed scheduler. It is driven by TimedReplay's
// event loop, which owns it: not safe for concurrent use.
//
// A step is composed when it starts and applied when it ends: every
// decoding request makes one token, then prefill chunks fill the rest of
// the budget, first those of running requests, then new admissions from
// the waiting queue while the running batch has room. A request's cached
// prefix is counted (and marked used) when it is admitted; its blocks are
// stored, and published, when its prefill ends, which is also when its
// first token is out.
type engine struct {
	cfg     EngineConfig
	store   blockStore
	waiting []*engineJob // FIFO; waiting[head:] are queued
	head    int
	running []*engineJob
	// stepping is true from startStep to finishStep.
	stepping bool
}

func newEngine(cfg EngineConfig, store blockStore) *engine {
	return &engine{cfg: cfg, store: store}
}

// active is the number of requests on the engine, waiting or running.
func (e *engine) active() int { return len(e.waiting) - e.head + len(e.running) }

func (e *engine) submit(req *TimedRequest) {
	e.waiting = append(e.waiting, &engineJob{req: req})
}

// startStep composes the next step at now and returns its duration;
// false when there is nothing to do (the engine idles until a submit).
func (e *engine) startStep(now time.Duration) (time.Duration, bool) {
	budget := e.cfg.MaxBatchTokens
	decode, prefill := 0, 0
	for _, j := range e.running {
		j.chunk = 0
		if j.decoding {
			decode++
			budget--
		}
	}
	for _, j := range e.running {
		if !j.decoding && budget > 0 {
			j.chunk = min(j.remaining, budget)
			budget -= j.chunk
			prefill += j.chunk
		}
	}
	for budget > 0 && len(e.running) < e.cfg.MaxRunning && e.head < len(e.waiting) {
		j := e.waiting[e.head]
		e.waiting[e.head] = nil
		e.head++
		e.admit(j, now)
		j.chunk = min(j.remaining, budget)
		budget -= j.chunk
		prefill += j.chunk
		e.running = append(e.running, j)
	}
	if e.head == len(e.waiting) {
		e.waiting, e.head = e.waiting[:0], 0
	}
	if decode == 0 && prefill == 0 {
		return 0, false
	}
	e.stepping = true
	return e.cfg.StepOverhead + time.Duration(prefill)*e.cfg.PrefillPerToken + time.Duration(decode)*e.cfg.DecodePerToken, true
}

// admit counts a request's cached prefix when it joins the running batch.
// Like vLLM, a fully cached prompt still computes its last token.
func (e *engine) admit(j *engineJob, now time.Duration) {
	r := j.req
	isl := len(r.Tokens)
	r.Admitted = now
	r.HitTokens = min(e.store.reuse(r.chain)*e.cfg.BlockSize, isl)
	j.remaining = max(isl-r.HitTokens, 1)
}

// stepOutcome is what the end of a step did to one request.
type stepOutcome struct {
	req        *TimedRequest
	firstToken bool // its prefill ended: first token out, blocks stored
	finished   bool // its last token is out
}

// finishStep applies the step that started last, at its end time now.
// Outcomes come in running-batch order; a request whose only token is its
// first has both flags. A store that fails (the Sim closed) is returned
// after the step is applied.
func (e *engine) finishStep(now time.Duration) ([]stepOutcome, error) {
	e.stepping = false
	var out []stepOutcome
	var firstErr error
	kept := e.running[:0]
	for _, j := range e.running {
		var o stepOutcome
		switch {
		case j.decoding:
			j.generated++
		case j.chunk > 0:
			j.remaining -= j.chunk
			if j.remaining == 0 {
				j.decoding, j.generated = true, 1
				o.firstToken = true
				j.req.FirstToken = now
				if _, err := e.store.store(j.req.Tokens, j.req.chain); err != nil && firstErr == nil {
					firstErr = err
				}
			}
		}
		j.chunk = 0
		if j.decoding && j.generated >= j.req.OutputLength {
			o.finished = true
			j.req.Done = now
		}
		if o.firstToken || o.finished {
			o.req = j.req
			out = append(out, o)
		}
		if !o.finished {
			kept = append(kept, j)
		}
	}
	clear(e.running[len(kept):])
	e.running = kept
	return out, firstErr
}
