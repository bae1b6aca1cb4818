package kvsim

import (
	"bufio"
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
)

// Synthetic traces: Mooncake-format requests with a sharing pattern of
// their own, so that a router tuned on one trace can be tried on traces it
// has never seen. Every id is a block of TraceBlockTokens tokens
// (TraceTokens); a prompt's ids are its blocks in order, so two prompts
// share exactly the leading ids they have in common, as in Mooncake's
// traces. A generator is a pure function of its configuration and seed.

// Trace patterns GenerateTrace knows.
const (
	// PatternTenants is many tenants, each with a long system prompt of
	// its own that every one of its requests starts with, and short
	// unique suffixes; tenants are drawn by a Zipf law, so a few are
	// popular. High sharing, shallow: the prefix is the whole story.
	PatternTenants = "tenants"
	// PatternSessions is multi-turn conversations: each turn's prompt is
	// the previous turn's plus the answer and a new question, so prompts
	// grow and each extends one earlier prompt; a short header is common
	// to every session. Deep sharing, one predecessor per prompt.
	PatternSessions = "sessions"
	// PatternRandom is near-random prompts of random lengths that share
	// only a one-block header: almost nothing to gain from the cache,
	// everything from balancing load.
	PatternRandom = "random"
)

// TracePatterns lists the patterns, in the order the docs give them.
var TracePatterns = []string{PatternTenants, PatternSessions, PatternRandom}

// TraceGenConfig describes a synthetic trace. Zero fields take the
// defaults below, chosen so that each pattern offers about the load of
// the shared Mooncake trace (about 4 requests/s, 15 k input tokens and 150
// output tokens a request on average) and runs at the same -speed.
type TraceGenConfig struct {
	// Pattern is one of TracePatterns.
	Pattern string
	// Requests is how many requests the trace has (2000).
	Requests int
	// Rate is the mean arrival rate in requests per second, arrivals
	// Poisson (4).
	Rate float64
	// Seed makes the trace: the same seed, the same trace.
	Seed uint64
	// TraceBlockTokens is the tokens per id (DefaultTraceBlockTokens).
	TraceBlockTokens int
	// OutputMedian is the median output length in tokens, drawn
	// log-normal with a mean about twice the median (70).
	OutputMedian int

	// Tenants: how many (100), their system prompts' mean length in
	// blocks (24, each tenant's drawn in [½, 1½] of it), the unique
	// suffix's mean length in blocks (3) and the Zipf exponent of the
	// tenants' popularity (1.2, > 1).
	Tenants, SystemBlocks, SuffixBlocks int
	TenantSkew                          float64

	// Sessions: the mean turns per session (10, drawn in [1, 2·mean−1]),
	// the first turn's mean length in blocks (6), the blocks each turn
	// adds (answer and question: 1 to 2·mean−1, mean 4), the mean think
	// time between turns in seconds (30) and the longest prompt in
	// blocks (128): a session ends there.
	Turns, FirstBlocks, TurnBlocks int
	ThinkSeconds                   float64
	MaxBlocks                      int

	// Random: the prompts' mean length in blocks (30, drawn uniformly in
	// [1, 2·mean−1]).
	PromptBlocks int
}

// WithDefaults returns cfg with zero fields set to their defaults.
func (cfg TraceGenConfig) WithDefaults() TraceGenConfig {
	cfg.Requests = cmp.Or(cfg.Requests, 2000)
	cfg.Rate = cmp.Or(cfg.Rate, 4)
	cfg.TraceBlockTokens = cmp.Or(cfg.TraceBlockTokens, DefaultTraceBlockTokens)
	cfg.OutputMedian = cmp.Or(cfg.OutputMedian, 70)
	cfg.Tenants = cmp.Or(cfg.Tenants, 100)
	cfg.SystemBlocks = cmp.Or(cfg.SystemBlocks, 24)
	cfg.SuffixBlocks = cmp.Or(cfg.SuffixBlocks, 3)
	cfg.TenantSkew = cmp.Or(cfg.TenantSkew, 1.2)
	cfg.Turns = cmp.Or(cfg.Turns, 10)
	cfg.FirstBlocks = cmp.Or(cfg.FirstBlocks, 6)
	cfg.TurnBlocks = cmp.Or(cfg.TurnBlocks, 4)
	cfg.ThinkSeconds = cmp.Or(cfg.ThinkSeconds, 30)
	cfg.MaxBlocks = cmp.Or(cfg.MaxBlocks, 128)
	cfg.PromptBlocks = cmp.Or(cfg.PromptBlocks, 30)
	return cfg
}

// Validate checks a configuration that has its defaults.
func (cfg TraceGenConfig) Validate() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: trace generator: "+format, append([]any{ErrInvalidConfig}, args...)...)
	}
	switch {
	case !slices.Contains(TracePatterns, cfg.Pattern):
		return bad("pattern %q (want one of %s)", cfg.Pattern, strings.Join(TracePatterns, ", "))
	case cfg.Requests < 1:
		return bad("requests must be positive, got %d", cfg.Requests)
	case !(cfg.Rate > 0) || math.IsInf(cfg.Rate, 0):
		return bad("rate must be a positive number, got %v", cfg.Rate)
	case cfg.TraceBlockTokens < 1:
		return bad("trace block tokens must be positive, got %d", cfg.TraceBlockTokens)
	case cfg.OutputMedian < 1:
		return bad("output median must be positive, got %d", cfg.OutputMedian)
	case cfg.Tenants < 1 || cfg.SystemBlocks < 1 || cfg.SuffixBlocks < 1:
		return bad("tenants, system blocks and suffix blocks must be positive")
	case !(cfg.TenantSkew > 1) || math.IsInf(cfg.TenantSkew, 0):
		return bad("tenant skew (a Zipf exponent) must be above 1, got %v", cfg.TenantSkew)
	case cfg.Turns < 1 || cfg.FirstBlocks < 1 || cfg.TurnBlocks < 1 || cfg.PromptBlocks < 1:
		return bad("turns, first blocks, turn blocks and prompt blocks must be positive")
	case !(cfg.ThinkSeconds >= 0) || math.IsInf(cfg.ThinkSeconds, 0):
		return bad("think time must be a number >= 0, got %v", cfg.ThinkSeconds)
	case cfg.MaxBlocks < cfg.FirstBlocks:
		return bad("max blocks (%d) must be at least first blocks (%d)", cfg.MaxBlocks, cfg.FirstBlocks)
	case cfg.maxPromptTokens() > MaxTraceInputLength:
		return bad("prompts of up to %d tokens exceed %d", cfg.maxPromptTokens(), MaxTraceInputLength)
	}
	return nil
}

// maxPromptTokens bounds the longest prompt of the configured pattern.
func (cfg TraceGenConfig) maxPromptTokens() int {
	var blocks int
	switch cfg.Pattern {
	case PatternTenants:
		blocks = cfg.SystemBlocks/2 + cfg.SystemBlocks + 2*cfg.SuffixBlocks
	case PatternSessions:
		blocks = max(cfg.MaxBlocks, 2*cfg.FirstBlocks)
	case PatternRandom:
		blocks = 2 * cfg.PromptBlocks
	}
	return blocks * cfg.TraceBlockTokens
}

// GenerateTrace returns a synthetic trace, in arrival order, its first
// request at timestamp 0.
func GenerateTrace(cfg TraceGenConfig) ([]TraceRequest, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	g := &traceGen{cfg: cfg, rng: rand.New(rand.NewPCG(cfg.Seed, 0x6b7673696d747261))}
	var reqs []TraceRequest
	switch cfg.Pattern {
	case PatternTenants:
		reqs = g.tenants()
	case PatternSessions:
		reqs = g.sessions()
	case PatternRandom:
		reqs = g.random()
	}
	slices.SortStableFunc(reqs, func(a, b TraceRequest) int { return cmp.Compare(a.Timestamp, b.Timestamp) })
	reqs = reqs[:min(len(reqs), cfg.Requests)]
	first := reqs[0].Timestamp
	for i := range reqs {
		reqs[i].Timestamp -= first
	}
	return reqs, nil
}

// traceGen draws one trace; its methods return requests in any order.
type traceGen struct {
	cfg    TraceGenConfig
	rng    *rand.Rand
	nextID uint64
}

// ids returns n fresh ids.
func (g *traceGen) ids(n int) []uint64 {
	out := make([]uint64, n)
	for i := range out {
		out[i] = g.nextID
		g.nextID++
	}
	return out
}

// around draws uniformly in [1, 2·mean−1] (mean mean).
func (g *traceGen) around(mean int) int { return 1 + g.rng.IntN(2*mean-1) }

// gap draws a Poisson process's next inter-arrival time in ms at rate
// per second.
func (g *traceGen) gap(rate float64) float64 { return g.rng.ExpFloat64() / rate * 1000 }

// request makes a request over ids: its input is every id's tokens but
// for a random part of the last one, so lengths are not all round.
func (g *traceGen) request(ms float64, ids []uint64) TraceRequest {
	bt := g.cfg.TraceBlockTokens
	return TraceRequest{Timestamp: math.Round(ms), InputLength: len(ids)*bt - g.rng.IntN(bt), OutputLength: g.output(),
		HashIDs: ids}
}

// output draws an output length: log-normal, median OutputMedian, sigma
// 1.2 (the mean about twice the median, as in Mooncake's trace), at most
// 16 times the median.
func (g *traceGen) output() int {
	med := float64(g.cfg.OutputMedian)
	return int(min(max(math.Round(med*math.Exp(1.2*g.rng.NormFloat64())), 1), 16*med))
}

func (g *traceGen) tenants() []TraceRequest {
	c := g.cfg
	system := make([][]uint64, c.Tenants)
	for i := range system {
		system[i] = g.ids(max(1, c.SystemBlocks/2+g.rng.IntN(c.SystemBlocks+1)))
	}
	// Tenant 0 most popular; shuffled so that popularity and id order
	// are unrelated.
	zipf := rand.NewZipf(g.rng, c.TenantSkew, 1, uint64(c.Tenants-1))
	order := g.rng.Perm(c.Tenants)
	reqs := make([]TraceRequest, c.Requests)
	at := 0.0
	for i := range reqs {
		sys := system[order[zipf.Uint64()]]
		ids := append(slices.Clip(sys), g.ids(g.around(c.SuffixBlocks))...)
		reqs[i] = g.request(at, ids)
		at += g.gap(c.Rate)
	}
	return reqs
}

func (g *traceGen) sessions() []TraceRequest {
	c := g.cfg
	header := g.ids(1)
	// Sessions start as a Poisson process at Rate/Turns, from one mean
	// session's length before 0, so that the trace starts in steady
	// state; turns before 0 are dropped. Sessions are drawn until
	// Requests turns fall before the next session's start, so cutting at
	// Requests leaves no thinning tail.
	span := float64(c.Turns) * (c.ThinkSeconds*1000 + 1)
	start := -span
	var reqs []TraceRequest
	var times []float64 // every turn's time, to know when enough are in
	for {
		start += g.gap(c.Rate / float64(c.Turns))
		if start > 0 && countBefore(times, start) >= c.Requests {
			break
		}
		turns := g.around(c.Turns)
		ids := append(slices.Clip(header), g.ids(g.around(c.FirstBlocks))...)
		at := start
		for t := 0; t < turns; t++ {
			if t > 0 {
				more := g.around(c.TurnBlocks)
				if len(ids)+more > c.MaxBlocks {
					break
				}
				ids = append(slices.Clip(ids), g.ids(more)...)
				at += g.rng.ExpFloat64() * c.ThinkSeconds * 1000
			}
			if at >= 0 {
				reqs = append(reqs, g.request(at, ids))
				times = insertSorted(times, at)
			}
		}
	}
	return reqs
}

// countBefore is how many of the sorted times are before t.
func countBefore(sorted []float64, t float64) int {
	i, _ := slices.BinarySearch(sorted, t)
	return i
}

func insertSorted(sorted []float64, v float64) []float64 {
	i, _ := slices.BinarySearch(sorted, v)
	return slices.Insert(sorted, i, v)
}

func (g *traceGen) random() []TraceRequest {
	c := g.cfg
	header := g.ids(1)
	reqs := make([]TraceRequest, c.Requests)
	at := 0.0
	for i := range reqs {
		ids := append(slices.Clip(header), g.ids(g.around(c.PromptBlocks))...)
		reqs[i] = g.request(at, ids)
		at += g.gap(c.Rate)
	}
	return reqs
}

// WriteTrace writes requests as a Mooncake JSON-lines trace, one request a
// line, the form ReadTrace reads.
func WriteTrace(w io.Writer, reqs []TraceRequest) error {
	bw := bufio.NewWriter(w)
	enc := json.NewEncoder(bw)
	for _, q := range reqs {
		if err := enc.Encode(q); err != nil {
			return err
		}
	}
	return bw.Flush()
}
