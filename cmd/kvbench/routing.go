package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"github.com/kvselect/kvselect/scheduler"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/kvselect/kvselect/client"
	"github.com/kvselect/kvselect/fsm"
	"github.com/kvselect/kvselect/kvsim"
)

// Strategy names, in the order the table lists them.
const (
	strategyKvselect     = "kvselect"
	strategyKvselectOff  = "kvselect-no-sync"
	strategyRoundRobin   = "round-robin"
	strategyRandom       = "random"
	strategyLeastLoaded  = "least-loaded"
	strategyGreedyPrefix = "greedy-prefix"
	defaultRoutingTrace  = "../shared/traces/mooncake_synthetic_trace.jsonl"
	routingNodes         = 3
	defaultRoutingSpeed  = 6
	defaultRoutingCache  = 32768
	defaultRoutingBlock  = 16
	defaultRoutingWorker = 8
)

var allStrategies = []string{strategyKvselect, strategyKvselectOff, strategyRoundRobin, strategyRandom, strategyLeastLoaded, strategyGreedyPrefix}

// routingConfig is what kvbench routing's command line decides.
type routingConfig struct {
	trace            string
	limit            int
	speed            float64
	workers, dpSize  int
	traceBlockTokens int
	engine           kvsim.EngineConfig
	strategies       []string
	seed             uint64
	lifecycle        kvsim.Lifecycle
	realtime         bool
	overlapWeight    float64 // kvselect's overlap_score_weight; < 0: the node default
	httpObserver     bool    // settle on /workers and /loads instead of the nodes' state
	out, picture     string
	logLevel         slog.Level
}

func parseRoutingConfig(args []string, stderr io.Writer) (routingConfig, error) {
	fs := flag.NewFlagSet("routing", flag.ContinueOnError)
	fs.SetOutput(stderr)
	c := routingConfig{}
	fs.StringVar(&c.trace, "trace", defaultRoutingTrace, "Mooncake trace (JSON lines: timestamp ms, input_length, output_length, hash_ids)")
	fs.IntVar(&c.limit, "limit", 0, "replay at most this many requests of the trace (0 = all)")
	fs.Float64Var(&c.speed, "speed", defaultRoutingSpeed, "divide the trace's timestamps by this (2 = twice the request rate)")
	fs.IntVar(&c.workers, "workers", defaultRoutingWorker, "simulated workers")
	fs.IntVar(&c.dpSize, "dp-size", 1, "data-parallel ranks per worker")
	fs.IntVar(&c.traceBlockTokens, "trace-block-tokens", kvsim.DefaultTraceBlockTokens, "tokens per trace hash id")
	fs.IntVar(&c.engine.BlockSize, "block-size", defaultRoutingBlock, "KV block size in tokens")
	fs.IntVar(&c.engine.CacheBlocks, "cache-blocks", defaultRoutingCache, "KV cache per rank in blocks, evicted LRU (32768 × 16 tokens: an 8B model's KV cache on one 80 GB GPU)")
	fs.IntVar(&c.engine.MaxBatchTokens, "max-batch-tokens", kvsim.DefaultMaxBatchTokens, "token budget of one engine step (vLLM max_num_batched_tokens)")
	fs.IntVar(&c.engine.MaxRunning, "max-running", kvsim.DefaultMaxRunning, "running requests per engine (vLLM max_num_seqs)")
	fs.DurationVar(&c.engine.PrefillPerToken, "prefill-per-token", kvsim.DefaultPrefillPerToken, "engine time per uncached prompt token")
	fs.DurationVar(&c.engine.DecodePerToken, "decode-per-token", kvsim.DefaultDecodePerToken, "engine time per output token (one per running request per step)")
	fs.DurationVar(&c.engine.StepOverhead, "step-overhead", kvsim.DefaultStepOverhead, "fixed engine time of every step")
	strategies := fs.String("strategies", strings.Join(allStrategies, ","), "strategies to run, comma separated: "+strings.Join(allStrategies, ", "))
	fs.Uint64Var(&c.seed, "seed", 1, "seed of every random choice (random router, tie-breaks, kvselect's schedulers)")
	lifecycle := fs.String("lifecycle", "other", "where kvselect (with replica sync) hears prefill_complete and free: same (the node that booked) or other (the next node)")
	fs.Float64Var(&c.overlapWeight, "overlap-score-weight", -1, "kvselect nodes' overlap_score_weight (the weight of prefill blocks in the cost; default: the node default, 1)")
	observer := fs.String("observer", "process", "how settles see the nodes: process (the indexer's watermark and the scheduler's loads, exact) or http (/workers last_seq and /loads)")
	clock := fs.String("clock", "virtual", "virtual (a discrete-event clock: deterministic and fast) or real (wall-clock pacing)")
	fs.StringVar(&c.out, "out", "bench/results/routing.json", "JSON results file ('' for none)")
	fs.StringVar(&c.picture, "svg", "bench/results/routing.svg", "picture: TTFT CDF per strategy and hit-rate bars ('' for none)")
	logLevel := fs.String("log-level", "warn", "debug, info, warn or error")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	if fs.NArg() > 0 {
		return c, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	for _, s := range strings.Split(*strategies, ",") {
		s = strings.TrimSpace(s)
		if !slices.Contains(allStrategies, s) {
			return c, fmt.Errorf("-strategies: unknown %q (want some of %s)", s, strings.Join(allStrategies, ", "))
		}
		if !slices.Contains(c.strategies, s) {
			c.strategies = append(c.strategies, s)
		}
	}
	var err error
	if c.lifecycle, err = kvsim.ParseLifecycle(*lifecycle); err != nil {
		return c, err
	}
	switch *observer {
	case "process":
	case "http":
		c.httpObserver = true
	default:
		return c, fmt.Errorf("-observer must be process or http, got %q", *observer)
	}
	switch *clock {
	case "virtual":
	case "real":
		c.realtime = true
	default:
		return c, fmt.Errorf("-clock must be virtual or real, got %q", *clock)
	}
	if err := c.logLevel.UnmarshalText([]byte(*logLevel)); err != nil {
		return c, fmt.Errorf("-log-level: %w", err)
	}
	switch {
	case c.limit < 0:
		return c, fmt.Errorf("-limit must not be negative, got %d", c.limit)
	case c.speed <= 0:
		return c, fmt.Errorf("-speed must be positive, got %g", c.speed)
	case c.traceBlockTokens < 1:
		return c, fmt.Errorf("-trace-block-tokens must be positive, got %d", c.traceBlockTokens)
	}
	if _, err := kvsim.NewFleet(c.engine, c.workers, c.dpSize); err != nil {
		return c, err
	}
	return c, nil
}

// strategyResult is one strategy's run.
type strategyResult struct {
	Name    string        `json:"name"`
	Figures kvsim.Figures `json:"figures"`
	// Checks are the run's invariants: every request finished, every
	// engine and (for kvselect) every node ended with no load, no error.
	Checks      []string           `json:"failed_checks,omitempty"`
	Wall        float64            `json:"wall_s"`
	VirtualEnd  float64            `json:"virtual_end_s"`
	Errors      []string           `json:"error_samples,omitempty"`
	ttft        []time.Duration    // for the CDF
	replay      *kvsim.TimedResult // the raw record
	description string
}

func routing(args []string, stdout, stderr io.Writer) error {
	cfg, err := parseRoutingConfig(args, stderr)
	if err != nil {
		return err
	}
	ctx, stop := signalContext()
	defer stop()
	results, err := runRouting(ctx, cfg, stderr)
	if err != nil {
		return err
	}
	targets := routingTargets(results)
	printRoutingTable(stdout, cfg, results, targets)
	if cfg.out != "" {
		if err := writeRoutingJSON(cfg, results, targets); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "results: %s\n", cfg.out)
	}
	if cfg.picture != "" {
		if err := os.MkdirAll(filepath.Dir(cfg.picture), 0o755); err != nil {
			return err
		}
		if err := drawRouting(cfg.picture, results); err != nil {
			return fmt.Errorf("picture: %w", err)
		}
		fmt.Fprintf(stdout, "picture: %s\n", cfg.picture)
	}
	var failed []string
	for _, r := range results {
		for _, c := range r.Checks {
			failed = append(failed, r.Name+": "+c)
		}
	}
	if len(failed) > 0 {
		return fmt.Errorf("invariants failed:\n  %s", strings.Join(failed, "\n  "))
	}
	return nil
}

// runRouting reads the trace and runs every strategy on an identical
// fleet and arrival sequence.
func runRouting(ctx context.Context, cfg routingConfig, stderr io.Writer) ([]*strategyResult, error) {
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: cfg.logLevel}))
	f, err := os.Open(cfg.trace)
	if err != nil {
		return nil, fmt.Errorf("-trace: %w", err)
	}
	reqs, err := kvsim.ReadTrace(f)
	f.Close()
	if err != nil {
		return nil, err
	}
	if len(reqs) == 0 {
		return nil, fmt.Errorf("-trace %s holds no request", cfg.trace)
	}
	var out []*strategyResult
	for _, name := range cfg.strategies {
		fmt.Fprintf(stderr, "routing: %s ...\n", name)
		r, err := runStrategy(ctx, cfg, name, reqs, log)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		fmt.Fprintf(stderr, "routing: %s done in %.1fs: hit rate %.3f, TTFT p90 %.0f ms\n", name, r.Wall, r.Figures.HitRate, r.Figures.TTFTp90)
		out = append(out, r)
	}
	return out, nil
}

func (cfg routingConfig) timedOptions(name string, log *slog.Logger) kvsim.TimedOptions {
	return kvsim.TimedOptions{TraceBlockTokens: cfg.traceBlockTokens, Speed: cfg.speed, Limit: cfg.limit,
		Realtime: cfg.realtime, Name: name, Log: log, ProgressEvery: 1000}
}

func runStrategy(ctx context.Context, cfg routingConfig, name string, reqs []kvsim.TraceRequest, log *slog.Logger) (*strategyResult, error) {
	if name == strategyKvselect || name == strategyKvselectOff {
		return runKvselect(ctx, cfg, name, reqs, log)
	}
	fleet, err := kvsim.NewFleet(cfg.engine, cfg.workers, cfg.dpSize)
	if err != nil {
		return nil, err
	}
	var router kvsim.Router
	switch name {
	case strategyRoundRobin:
		router = kvsim.NewRoundRobin(fleet)
	case strategyRandom:
		router = kvsim.NewRandom(fleet, cfg.seed)
	case strategyLeastLoaded:
		router = kvsim.NewLeastLoaded(fleet, cfg.seed)
	case strategyGreedyPrefix:
		router = kvsim.NewGreedyPrefix(fleet, cfg.seed)
	default:
		return nil, fmt.Errorf("unknown strategy %q", name)
	}
	res, err := kvsim.TimedReplay(ctx, fleet, reqs, router, cfg.timedOptions(name, log))
	if err != nil {
		return nil, err
	}
	return newStrategyResult(name, res, nil), nil
}

// runKvselect runs a fresh 3-node cluster (replica sync on or off) and a
// fresh kvsim fleet registered with it, and replays the trace through
// them the way Ray's replicas would.
func runKvselect(ctx context.Context, cfg routingConfig, name string, reqs []kvsim.TraceRequest, log *slog.Logger) (res *strategyResult, err error) {
	sync := name == strategyKvselect
	nodeLog := slog.New(slog.DiscardHandler) // Raft's shutdown chatter is noise here
	if cfg.logLevel <= slog.LevelDebug {
		nodeLog = log
	}
	var policy scheduler.PolicySpec
	if cfg.overlapWeight >= 0 {
		policy = scheduler.PolicySpec{Name: "dynamo-default", Params: map[string]float64{"overlap_score_weight": cfg.overlapWeight}}
	}
	cl, err := startLocalCluster(ctx, routingNodes, sync, cfg.seed, policy, nodeLog)
	if err != nil {
		return nil, err
	}
	defer func() { err = errors.Join(err, cl.close()) }()
	sim, err := kvsim.Start(kvsim.Config{Workers: cfg.workers, DPSize: cfg.dpSize, BlockSize: cfg.engine.BlockSize,
		CacheBlocks: cfg.engine.CacheBlocks, Log: log.With("part", "kvsim")})
	if err != nil {
		return nil, err
	}
	defer func() { err = errors.Join(err, sim.Close()) }()
	urls := cl.urls()
	if err := sim.Register(ctx, urls[0]); err != nil {
		return nil, err
	}
	fleet, err := kvsim.NewSimFleet(sim, cfg.engine)
	if err != nil {
		return nil, err
	}
	nodes := make([]*client.Client, len(urls))
	for i, u := range urls {
		if nodes[i], err = client.New(client.Config{Addrs: []string{u}, HTTPClient: &http.Client{Timeout: 30 * time.Second}}); err != nil {
			return nil, err
		}
	}
	part := fsm.PartitionKey{Model: sim.Config().Model, Tenant: sim.Config().Tenant}
	lifecycle := cfg.lifecycle
	if !sync {
		lifecycle = kvsim.LifecycleSameNode // without sync another node does not know the booking
	}
	var observer kvsim.NodeObserver = inProcessObserver{nodes: cl.nodes, fleet: fleet, part: part}
	if cfg.httpObserver {
		observer = nil // the router's default
	}
	router, err := kvsim.NewKvselectRouter(fleet, sim, kvsim.KvselectConfig{Nodes: nodes, ReplicaSync: sync, Lifecycle: lifecycle,
		Observer: observer})
	if err != nil {
		return nil, err
	}
	if err := router.Prepare(ctx); err != nil {
		return nil, err
	}
	replay, err := kvsim.TimedReplay(ctx, fleet, reqs, router, cfg.timedOptions(name, log))
	if err != nil {
		return nil, err
	}
	var checks []string
	if err := router.Settle(ctx); err != nil {
		checks = append(checks, "nodes did not settle after the replay: "+err.Error())
	}
	for i, s := range cl.nodes {
		for _, p := range s.Scheduler.Loads(part.Model, part.Tenant) {
			for _, l := range p.Loads {
				if l.ActiveRequests != 0 || l.ActivePrefillTokens != 0 || l.ActiveDecodeBlocks != 0 {
					checks = append(checks, fmt.Sprintf("node %s ends with load on worker %d rank %d: %d requests, %d prefill tokens, %g decode blocks",
						nodeName(i), l.WorkerID, l.DPRank, l.ActiveRequests, l.ActivePrefillTokens, l.ActiveDecodeBlocks))
				}
			}
		}
	}
	return newStrategyResult(name, replay, checks), nil
}

func newStrategyResult(name string, res *kvsim.TimedResult, checks []string) *strategyResult {
	f := res.Figures()
	if f.Served+f.Rejected != f.Requests {
		checks = append(checks, fmt.Sprintf("%d of %d requests neither served nor rejected", f.Requests-f.Served-f.Rejected, f.Requests))
	}
	if res.Errors > 0 {
		checks = append(checks, fmt.Sprintf("%d errors, first: %s", res.Errors, res.ErrorSamples[0]))
	}
	for i, n := range res.FinalActive {
		if n != 0 {
			checks = append(checks, fmt.Sprintf("engine %d ends with %d active requests", i, n))
		}
	}
	return &strategyResult{Name: name, Figures: f, Checks: checks, Wall: res.Wall.Seconds(), VirtualEnd: res.End.Seconds(),
		Errors: res.ErrorSamples, ttft: res.TTFTs(), replay: res, description: describeStrategy(name)}
}

func describeStrategy(name string) string {
	switch name {
	case strategyKvselect:
		return "3 kvselect nodes, replica sync on, /select_and_reserve round-robin over the nodes"
	case strategyKvselectOff:
		return "the same with replica sync off: each node sees only its own bookings"
	case strategyRoundRobin:
		return "request i to engine i mod n"
	case strategyRandom:
		return "uniform random engine"
	case strategyLeastLoaded:
		return "fewest active requests (waiting or running)"
	case strategyGreedyPrefix:
		return "knows every cache: longest cached prefix, ties by active requests (hit-rate bound)"
	}
	return ""
}

// routingTarget is one of SPEC §12's routing targets, checked on a run.
type routingTarget struct {
	Name   string  `json:"name"`
	Value  float64 `json:"value"`
	Target string  `json:"target"`
	Met    bool    `json:"met"`
}

// routingTargets checks the targets whose strategies ran.
func routingTargets(results []*strategyResult) []routingTarget {
	by := map[string]kvsim.Figures{}
	for _, r := range results {
		by[r.Name] = r.Figures
	}
	kv, ok := by[strategyKvselect]
	if !ok {
		return nil
	}
	var out []routingTarget
	if rr, ok := by[strategyRoundRobin]; ok {
		out = append(out,
			routingTarget{"hit rate vs round-robin", kv.HitRate, fmt.Sprintf(">= 2 x %.3f", rr.HitRate), kv.HitRate >= 2*rr.HitRate},
			routingTarget{"TTFT p90 vs round-robin (ms)", kv.TTFTp90, fmt.Sprintf("<= 0.5 x %.0f", rr.TTFTp90), kv.TTFTp90 <= 0.5*rr.TTFTp90})
	}
	if ll, ok := by[strategyLeastLoaded]; ok {
		out = append(out,
			routingTarget{"TTFT p90 vs least-loaded (ms)", kv.TTFTp90, fmt.Sprintf("<= %.0f", ll.TTFTp90), kv.TTFTp90 <= ll.TTFTp90},
			routingTarget{"load imbalance vs least-loaded", kv.Imbalance, fmt.Sprintf("<= 1.1 x %.2f", ll.Imbalance), kv.Imbalance <= 1.1*ll.Imbalance})
	}
	if off, ok := by[strategyKvselectOff]; ok {
		out = append(out, routingTarget{"TTFT p90 with replica sync vs without (ms)", kv.TTFTp90, fmt.Sprintf("< %.0f", off.TTFTp90), kv.TTFTp90 < off.TTFTp90})
	}
	return out
}

func printRoutingTable(w io.Writer, cfg routingConfig, results []*strategyResult, targets []routingTarget) {
	n := 0
	if len(results) > 0 {
		n = results[0].Figures.Requests
	}
	fmt.Fprintf(w, "routing on %s: %d requests at %gx, %d workers x %d rank, cache %d blocks of %d tokens, %s time\n",
		filepath.Base(cfg.trace), n, cfg.speed, cfg.workers, cfg.dpSize, cfg.engine.CacheBlocks, cfg.engine.BlockSize, map[bool]string{false: "virtual", true: "real"}[cfg.realtime])
	fmt.Fprintf(w, "%-17s %8s %9s %9s %9s %9s %9s %8s %9s %8s %6s\n",
		"strategy", "hit rate", "TTFT p50", "TTFT p90", "TTFT p99", "E2E p50", "E2E p99", "req/s", "imbalance", "503 rate", "errors")
	for _, r := range results {
		f := r.Figures
		fmt.Fprintf(w, "%-17s %8.3f %9.0f %9.0f %9.0f %9.0f %9.0f %8.2f %9.2f %8.4f %6d\n",
			r.Name, f.HitRate, f.TTFTp50, f.TTFTp90, f.TTFTp99, f.E2Ep50, f.E2Ep99, f.Throughput, f.Imbalance, f.RejectRate, f.Errors)
	}
	fmt.Fprintln(w, "(latencies in ms of virtual time; imbalance = busiest engine's active requests over the mean engine's, integrated over time)")
	fmt.Fprintf(w, "%-17s %16s %16s %16s\n", "decisions", "longest prefix", "prefix routed to", "longest prefix")
	fmt.Fprintf(w, "%-17s %16s %16s %16s\n", "(at routing)", "% of requests", "% of tokens", "% of tokens")
	for _, r := range results {
		f := r.Figures
		fmt.Fprintf(w, "%-17s %16.1f %16.1f %16.1f\n", r.Name, 100*f.LongestPrefixShare, 100*f.RoutedPrefixRate, 100*f.BestPrefixRate)
	}
	for _, t := range targets {
		status := "MISSED"
		if t.Met {
			status = "met"
		}
		fmt.Fprintf(w, "target %-44s %10.3f %-22s %s\n", t.Name, t.Value, t.Target, status)
	}
}

func writeRoutingJSON(cfg routingConfig, results []*strategyResult, targets []routingTarget) error {
	type strategyDoc struct {
		*strategyResult
		Description string `json:"description"`
	}
	doc := struct {
		Generated  string          `json:"generated"`
		GoVersion  string          `json:"go_version"`
		CPUs       int             `json:"cpus"`
		Config     map[string]any  `json:"config"`
		Strategies []strategyDoc   `json:"strategies"`
		Targets    []routingTarget `json:"targets"`
	}{Generated: time.Now().UTC().Format(time.RFC3339), GoVersion: runtime.Version(), CPUs: runtime.NumCPU(),
		Config: map[string]any{
			"trace": cfg.trace, "limit": cfg.limit, "speed": cfg.speed, "workers": cfg.workers, "dp_size": cfg.dpSize,
			"trace_block_tokens": cfg.traceBlockTokens, "block_size": cfg.engine.BlockSize, "cache_blocks": cfg.engine.CacheBlocks,
			"max_batch_tokens": cfg.engine.MaxBatchTokens, "max_running": cfg.engine.MaxRunning,
			"prefill_per_token_us": float64(cfg.engine.PrefillPerToken) / float64(time.Microsecond),
			"decode_per_token_us":  float64(cfg.engine.DecodePerToken) / float64(time.Microsecond),
			"step_overhead_us":     float64(cfg.engine.StepOverhead) / float64(time.Microsecond),
			"overlap_score_weight": cfg.overlapWeight,
			"seed":                 cfg.seed, "lifecycle": cfg.lifecycle.String(), "realtime": cfg.realtime,
		}, Targets: targets}
	for _, r := range results {
		doc.Strategies = append(doc.Strategies, strategyDoc{r, r.description})
	}
	raw, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(cfg.out), 0o755); err != nil {
		return err
	}
	return os.WriteFile(cfg.out, append(raw, '\n'), 0o644)
}
