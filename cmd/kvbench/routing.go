package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
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
	"github.com/kvselect/kvselect/scheduler"
	"github.com/kvselect/kvselect/server/localcluster"
)

// Strategy names as -strategies takes them and the JSON names them.
const (
	strategyKvselect     = "kvselect"
	strategyKvselectOff  = "kvselect-no-sync"
	strategyRoundRobin   = "round-robin"
	strategyRandom       = "random"
	strategyLeastLoaded  = "least-loaded"
	strategyGreedyPrefix = "greedy-prefix"
	// policyDynamoDefault is the policy SPEC §12 compares the shipped
	// default with when the default is another.
	policyDynamoDefault = "dynamo-default"
)

const (
	defaultRoutingTrace  = "testdata/traces/mooncake_synthetic_trace.jsonl"
	routingNodes         = 3
	defaultRoutingSpeed  = 6
	defaultRoutingCache  = 32768
	defaultRoutingBlock  = 16
	defaultRoutingWorker = 8
	// defaultGoodputTTFT is the TTFT a request must be served within to
	// count as goodput: about twice kvselect's p90 at the default speed
	// on the shared trace, and ten times an idle engine's prefill of the
	// trace's median prompt (11.6 k tokens at about 50 k tokens/s).
	defaultGoodputTTFT = 2 * time.Second
)

// comparedPolicies are the named policies SPEC §12 runs beside the
// shipped default, each on its own cluster; the one that is the default
// is left out (it runs as kvselect).
var comparedPolicies = []string{policyDynamoDefault, "two-tier", "agentic", "predicted-ttft"}

// strategy is one way of routing a run: through kvselect nodes (policy
// names the nodes' default policy, "" for the shipped default without
// override) or a kvsim-side baseline.
type strategy struct {
	name     string // what -strategies takes and the JSON's "name"
	display  string // what the table and the picture show
	kvselect bool
	sync     bool   // kvselect: replica sync between the nodes
	policy   string // kvselect: the nodes' policy; "" the shipped default
}

// routingStrategies lists every strategy, in the order the table lists
// them, for a build whose shipped default policy is defaultPolicy.
func routingStrategies(defaultPolicy string) []strategy {
	out := []strategy{
		{name: strategyKvselect, display: strategyKvselect, kvselect: true, sync: true},
		{name: strategyKvselectOff, display: strategyKvselectOff, kvselect: true},
	}
	for _, p := range comparedPolicies {
		if p != defaultPolicy {
			out = append(out, strategy{name: p, display: p, kvselect: true, sync: true, policy: p})
		}
	}
	return append(out,
		strategy{name: strategyRoundRobin, display: strategyRoundRobin},
		strategy{name: strategyRandom, display: strategyRandom},
		strategy{name: strategyLeastLoaded, display: "least-loaded (true engine load)"},
		strategy{name: strategyGreedyPrefix, display: strategyGreedyPrefix},
	)
}

// allStrategies are this build's strategies.
var allStrategies = routingStrategies(scheduler.DefaultPolicy)

func strategyNames(ss []strategy) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = s.name
	}
	return out
}

// parseStrategies reads -strategies: names or display names, comma
// separated, in any order; the run keeps the table's order.
func parseStrategies(list string) ([]strategy, error) {
	want := map[string]bool{}
	for _, s := range strings.Split(list, ",") {
		s = strings.TrimSpace(s)
		found := false
		for _, st := range allStrategies {
			if s == st.name || s == st.display {
				want[st.name], found = true, true
			}
		}
		if !found {
			return nil, fmt.Errorf("-strategies: unknown %q (want some of %s)", s, strings.Join(strategyNames(allStrategies), ", "))
		}
	}
	var out []strategy
	for _, st := range allStrategies {
		if want[st.name] {
			out = append(out, st)
		}
	}
	return out, nil
}

// Fleets: every engine alike, or a quarter of them (rounded up) half as
// fast, the last ones in fleet order.
const (
	fleetUniform = "uniform"
	fleetHetero  = "hetero"
)

var fleetKinds = []string{fleetUniform, fleetHetero}

// slowEngines is how many engines of n are slow in a fleet of kind.
func slowEngines(kind string, n int) int {
	if kind != fleetHetero {
		return 0
	}
	return (n + 3) / 4
}

// shapeFleet makes the fleet's slow engines half as fast: every cost
// doubled.
func shapeFleet(f *kvsim.Fleet, kind string) error {
	n := f.Len()
	for i := n - slowEngines(kind, n); i < n; i++ {
		slow := f.Config()
		slow.PrefillPerToken, slow.DecodePerToken, slow.StepOverhead = 2*slow.PrefillPerToken, 2*slow.DecodePerToken, 2*slow.StepOverhead
		if err := f.SetEngineConfig(i, slow); err != nil {
			return err
		}
	}
	return nil
}

// routingConfig is what kvbench routing's command line decides.
type routingConfig struct {
	trace                string
	offset, every, limit int
	speed                float64
	workers, dpSize      int
	fleet                string
	traceBlockTokens     int
	engine               kvsim.EngineConfig
	strategies           []strategy
	seed                 uint64
	lifecycle            kvsim.Lifecycle
	realtime             bool
	overlapWeight        float64 // kvselect's overlap_score_weight; < 0: the node default
	busyPrefillTokens    uint64  // the nodes' active_prefill_tokens busy threshold; 0: none
	goodputTTFT          time.Duration
	gate                 bool
	httpObserver         bool // settle on /workers and /loads instead of the nodes' state
	out, picture         string
	logLevel             slog.Level
}

// routingOutputs is how kvbench routing and routing-sweep differ in the
// flags they share: the base name of their results under bench/results,
// what -strategies are run for, and what the -svg picture shows.
type routingOutputs struct {
	name, strategies, picture string
}

// routingFlags defines the flags kvbench routing and routing-sweep share
// on fs; parse parses the command line and checks them.
func routingFlags(fs *flag.FlagSet, c *routingConfig, o routingOutputs) (parse func(args []string) error) {
	strategies := fs.String("strategies", strings.Join(strategyNames(allStrategies), ","), o.strategies+", comma separated: "+strings.Join(strategyNames(allStrategies), ", "))
	fs.StringVar(&c.out, "out", "bench/results/"+o.name+".json", "JSON results file ('' for none)")
	fs.StringVar(&c.picture, "svg", "bench/results/"+o.name+".svg", "picture: "+o.picture+" ('' for none)")
	fs.StringVar(&c.trace, "trace", defaultRoutingTrace, "Mooncake trace (JSON lines: timestamp ms, input_length, output_length, hash_ids); kvbench trace-gen writes synthetic ones")
	fs.IntVar(&c.offset, "offset", 0, "skip the trace's first N requests")
	fs.IntVar(&c.every, "every", 1, "replay every k-th request of the trace (after -offset; this thins the arrivals k-fold, so raise -speed k-fold to keep the rate)")
	fs.IntVar(&c.limit, "limit", 0, "replay at most this many requests (after -offset and -every; 0 = all)")
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
	fs.Uint64Var(&c.seed, "seed", 1, "seed of every random choice (random router, tie-breaks, kvselect's schedulers)")
	lifecycle := fs.String("lifecycle", "other", "where kvselect (with replica sync) hears prefill_complete and free: same (the node that booked) or other (the next node)")
	fs.Float64Var(&c.overlapWeight, "overlap-score-weight", -1, "overlap_score_weight of the kvselect strategies whose policy takes it (the cost policies: dynamo-default, agentic, and kvselect when its default is one); default: the policy's own")
	fs.DurationVar(&c.goodputTTFT, "goodput-ttft", defaultGoodputTTFT, "goodput counts the requests served within this TTFT (503s and failures count against it)")
	fs.BoolVar(&c.gate, "gate", false, "exit non-zero when a SPEC §12 target is missed (by default targets are reported, and only an invariant fails the run)")
	observer := fs.String("observer", "process", "how settles see the nodes: process (the indexer's watermark and the scheduler's loads, exact) or http (/workers last_seq and /loads)")
	clock := fs.String("clock", "virtual", "virtual (a discrete-event clock, the nodes' schedulers on it too: deterministic and fast) or real (wall-clock pacing)")
	logLevel := fs.String("log-level", "warn", "debug, info, warn or error")
	return func(args []string) error {
		if err := fs.Parse(args); err != nil {
			return err
		}
		if fs.NArg() > 0 {
			return fmt.Errorf("unexpected arguments %q", fs.Args())
		}
		var err error
		if c.lifecycle, err = kvsim.ParseLifecycle(*lifecycle); err != nil {
			return err
		}
		switch *observer {
		case "process":
		case "http":
			c.httpObserver = true
		default:
			return fmt.Errorf("-observer must be process or http, got %q", *observer)
		}
		switch *clock {
		case "virtual":
		case "real":
			c.realtime = true
		default:
			return fmt.Errorf("-clock must be virtual or real, got %q", *clock)
		}
		if err := c.logLevel.UnmarshalText([]byte(*logLevel)); err != nil {
			return fmt.Errorf("-log-level: %w", err)
		}
		switch {
		case c.offset < 0:
			return fmt.Errorf("-offset must not be negative, got %d", c.offset)
		case c.every < 1:
			return fmt.Errorf("-every must be at least 1, got %d", c.every)
		case c.limit < 0:
			return fmt.Errorf("-limit must not be negative, got %d", c.limit)
		case c.traceBlockTokens < 1:
			return fmt.Errorf("-trace-block-tokens must be positive, got %d", c.traceBlockTokens)
		case c.goodputTTFT <= 0:
			return fmt.Errorf("-goodput-ttft must be positive, got %s", c.goodputTTFT)
		}
		if _, err := kvsim.NewFleet(c.engine, c.workers, c.dpSize); err != nil {
			return err
		}
		c.strategies, err = parseStrategies(*strategies)
		return err
	}
}

func parseRoutingConfig(args []string, stderr io.Writer) (routingConfig, error) {
	fs := flag.NewFlagSet("routing", flag.ContinueOnError)
	fs.SetOutput(stderr)
	c := routingConfig{}
	parse := routingFlags(fs, &c, routingOutputs{name: "routing", strategies: "strategies to run",
		picture: "TTFT CDF per strategy and hit-rate bars"})
	fs.Float64Var(&c.speed, "speed", defaultRoutingSpeed, "divide the trace's timestamps by this (2 = twice the request rate)")
	fs.StringVar(&c.fleet, "fleet", fleetUniform, "uniform (every engine alike) or hetero (the last quarter of the engines, rounded up, half as fast: every engine cost doubled)")
	fs.Uint64Var(&c.busyPrefillTokens, "busy-prefill-tokens", 0, "the kvselect nodes' busy threshold, active prefill tokens per rank (0 = none: nothing is refused)")
	if err := parse(args); err != nil {
		return c, err
	}
	if c.speed <= 0 {
		return c, fmt.Errorf("-speed must be positive, got %g", c.speed)
	}
	if !slices.Contains(fleetKinds, c.fleet) {
		return c, fmt.Errorf("-fleet must be uniform or hetero, got %q", c.fleet)
	}
	return c, nil
}

// subsetTrace is the part of the trace a run replays: from offset, every
// k-th request, at most limit (0: all).
func subsetTrace(reqs []kvsim.TraceRequest, offset, every, limit int) []kvsim.TraceRequest {
	var out []kvsim.TraceRequest
	for i := offset; i < len(reqs) && (limit == 0 || len(out) < limit); i += every {
		out = append(out, reqs[i])
	}
	return out
}

// loadTrace reads the trace and keeps the part the run replays.
func loadTrace(cfg routingConfig) ([]kvsim.TraceRequest, error) {
	f, err := os.Open(cfg.trace)
	if err != nil {
		return nil, fmt.Errorf("-trace: %w", err)
	}
	reqs, err := kvsim.ReadTrace(f)
	f.Close()
	if err != nil {
		return nil, err
	}
	reqs = subsetTrace(reqs, cfg.offset, cfg.every, cfg.limit)
	if len(reqs) == 0 {
		return nil, fmt.Errorf("-trace %s holds no request to replay (after -offset %d, -every %d)", cfg.trace, cfg.offset, cfg.every)
	}
	return reqs, nil
}

// strategyResult is one strategy's run.
type strategyResult struct {
	Name    string        `json:"name"`
	Display string        `json:"display_name"`
	Policy  string        `json:"policy,omitempty"` // kvselect strategies: the nodes' policy
	Figures kvsim.Figures `json:"figures"`
	Goodput kvsim.Goodput `json:"goodput"`
	// Checks are the run's invariants: every request finished, every
	// engine and (for kvselect) every node ended with no load, no error.
	Checks      []string           `json:"failed_checks,omitempty"`
	Wall        float64            `json:"wall_s"`
	VirtualEnd  float64            `json:"virtual_end_s"`
	Errors      []string           `json:"error_samples,omitempty"`
	ttft        []time.Duration    // for the CDF
	replay      *kvsim.TimedResult // the raw record
	description string
	order       int // the strategy's place in allStrategies (its colour)
}

// routingRun is one replay of the trace by every strategy asked for.
type routingRun struct {
	results []*strategyResult
	// bound is the trace's infinite-cache hit rate (kvsim.InfiniteCacheHitRate).
	bound    float64
	requests int
}

func routing(args []string, stdout, stderr io.Writer) error {
	cfg, err := parseRoutingConfig(args, stderr)
	if err != nil {
		return err
	}
	ctx, stop := signalContext()
	defer stop()
	reqs, err := loadTrace(cfg)
	if err != nil {
		return err
	}
	run, err := runRouting(ctx, cfg, reqs, "", stderr)
	if err != nil {
		return err
	}
	targets := routingTargets(run.results, scheduler.DefaultPolicy, false)
	printRoutingTable(stdout, cfg, run, targets)
	if cfg.out != "" {
		if err := writeRoutingJSON(cfg, run, targets); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "results: %s\n", cfg.out)
	}
	if err := writePicture(stdout, cfg.picture, func(path string) error { return drawRouting(path, run) }); err != nil {
		return err
	}
	if err := failedChecks(run.results); err != nil {
		return err
	}
	if cfg.gate {
		return gateTargets(targets)
	}
	return nil
}

// failedChecks joins every strategy's failed invariants (nil for none).
func failedChecks(results []*strategyResult) error {
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

// runRouting runs every strategy of cfg on an identical fleet and arrival
// sequence; label prefixes the progress lines.
func runRouting(ctx context.Context, cfg routingConfig, reqs []kvsim.TraceRequest, label string, stderr io.Writer) (*routingRun, error) {
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: cfg.logLevel}))
	run := &routingRun{requests: len(reqs), bound: kvsim.InfiniteCacheHitRate(reqs, cfg.traceBlockTokens, cfg.engine.BlockSize)}
	for _, st := range cfg.strategies {
		fmt.Fprintf(stderr, "routing: %s%s ...\n", label, st.name)
		r, err := runStrategy(ctx, cfg, st, reqs, log)
		if err != nil {
			return nil, fmt.Errorf("%s%s: %w", label, st.name, err)
		}
		fmt.Fprintf(stderr, "routing: %s%s done in %.1fs: hit rate %.3f, TTFT p90 %.0f ms\n", label, st.name, r.Wall, r.Figures.HitRate, r.Figures.TTFTp90)
		run.results = append(run.results, r)
	}
	return run, nil
}

func (cfg routingConfig) timedOptions(name string, log *slog.Logger) kvsim.TimedOptions {
	return kvsim.TimedOptions{TraceBlockTokens: cfg.traceBlockTokens, Speed: cfg.speed,
		Realtime: cfg.realtime, Name: name, Log: log, ProgressEvery: 1000}
}

func runStrategy(ctx context.Context, cfg routingConfig, st strategy, reqs []kvsim.TraceRequest, log *slog.Logger) (*strategyResult, error) {
	if st.kvselect {
		return runKvselect(ctx, cfg, st, reqs, log)
	}
	fleet, err := kvsim.NewFleet(cfg.engine, cfg.workers, cfg.dpSize)
	if err != nil {
		return nil, err
	}
	if err := shapeFleet(fleet, cfg.fleet); err != nil {
		return nil, err
	}
	var router kvsim.Router
	switch st.name {
	case strategyRoundRobin:
		router = kvsim.NewRoundRobin(fleet)
	case strategyRandom:
		router = kvsim.NewRandom(fleet, cfg.seed)
	case strategyLeastLoaded:
		router = kvsim.NewLeastLoaded(fleet, cfg.seed)
	case strategyGreedyPrefix:
		router = kvsim.NewGreedyPrefix(fleet, cfg.seed)
	default:
		return nil, fmt.Errorf("unknown strategy %q", st.name)
	}
	res, err := kvsim.TimedReplay(ctx, fleet, reqs, router, cfg.timedOptions(st.name, log))
	if err != nil {
		return nil, err
	}
	return newStrategyResult(cfg, st, res, nil), nil
}

// nodePolicy is the default policy a kvselect strategy gives its nodes:
// the zero spec (the shipped default, no override) for kvselect and
// kvselect-no-sync, else the strategy's policy; -overlap-score-weight
// goes to the policies that take it.
func (cfg routingConfig) nodePolicy(st strategy) scheduler.PolicySpec {
	spec := scheduler.PolicySpec{Name: st.policy}
	if cfg.overlapWeight >= 0 {
		name := cmp.Or(st.policy, scheduler.DefaultPolicy)
		params, _, _ := scheduler.PolicyParams(name)
		if slices.ContainsFunc(params, func(p scheduler.Param) bool { return p.Name == "overlap_score_weight" }) {
			spec = scheduler.PolicySpec{Name: name, Params: map[string]float64{"overlap_score_weight": cfg.overlapWeight}}
		}
	}
	return spec
}

// runKvselect runs a fresh 3-node cluster (replica sync on or off) and a
// fresh kvsim fleet registered with it, and replays the trace through
// them the way Ray's replicas would. In virtual time the nodes'
// schedulers run on the replay's clock.
func runKvselect(ctx context.Context, cfg routingConfig, st strategy, reqs []kvsim.TraceRequest, log *slog.Logger) (res *strategyResult, err error) {
	nodeLog := slog.New(slog.DiscardHandler) // Raft's shutdown chatter is noise here
	if cfg.logLevel <= slog.LevelDebug {
		nodeLog = log
	}
	opts := nodeOptions{replicaSync: st.sync, seed: cfg.seed, policy: cfg.nodePolicy(st), busyPrefillTokens: cfg.busyPrefillTokens}
	var clock *kvsim.VirtualClock
	if !cfg.realtime {
		clock = kvsim.NewVirtualClock(time.Time{})
		opts.now = clock.Now
	}
	cl, err := startLocalCluster(ctx, routingNodes, opts, nodeLog)
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
	urls := cl.URLs()
	if err := sim.Register(ctx, urls[0]); err != nil {
		return nil, err
	}
	fleet, err := kvsim.NewSimFleet(sim, cfg.engine)
	if err != nil {
		return nil, err
	}
	if err := shapeFleet(fleet, cfg.fleet); err != nil {
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
	if !st.sync {
		lifecycle = kvsim.LifecycleSameNode // without sync another node does not know the booking
	}
	var observer kvsim.NodeObserver = inProcessObserver{nodes: cl.Nodes, fleet: fleet, part: part}
	if cfg.httpObserver {
		observer = nil // the router's default
	}
	router, err := kvsim.NewKvselectRouter(fleet, sim, kvsim.KvselectConfig{Nodes: nodes, ReplicaSync: st.sync, Lifecycle: lifecycle,
		Observer: observer})
	if err != nil {
		return nil, err
	}
	if err := router.Prepare(ctx); err != nil {
		return nil, err
	}
	if opts.busyPrefillTokens > 0 {
		if err := cl.waitThresholds(ctx, part.Model); err != nil {
			return nil, err
		}
	}
	topts := cfg.timedOptions(st.name, log)
	topts.Clock = clock
	replay, err := kvsim.TimedReplay(ctx, fleet, reqs, router, topts)
	if err != nil {
		return nil, err
	}
	var checks []string
	if err := router.Settle(ctx); err != nil {
		checks = append(checks, "nodes did not settle after the replay: "+err.Error())
	}
	for i, s := range cl.Nodes {
		for _, p := range s.Scheduler.Loads(part.Model, part.Tenant) {
			for _, l := range p.Loads {
				if l.ActiveRequests != 0 || l.ActivePrefillTokens != 0 || l.ActiveDecodeBlocks != 0 {
					checks = append(checks, fmt.Sprintf("node %s ends with load on worker %d rank %d: %d requests, %d prefill tokens, %g decode blocks",
						localcluster.NodeID(i), l.WorkerID, l.DPRank, l.ActiveRequests, l.ActivePrefillTokens, l.ActiveDecodeBlocks))
				}
			}
		}
	}
	return newStrategyResult(cfg, st, replay, checks), nil
}

func newStrategyResult(cfg routingConfig, st strategy, res *kvsim.TimedResult, checks []string) *strategyResult {
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
	policy := st.policy
	if st.kvselect {
		policy = cfg.nodePolicy(st).String()
		if policy == "" {
			policy = scheduler.DefaultPolicy
		}
	}
	return &strategyResult{Name: st.name, Display: st.display, Policy: policy, Figures: f, Goodput: res.Goodput(cfg.goodputTTFT),
		Checks: checks, Wall: res.Wall.Seconds(), VirtualEnd: res.End.Seconds(), Errors: res.ErrorSamples,
		ttft: res.TTFTs(), replay: res, description: describeStrategy(st), order: slices.IndexFunc(allStrategies, func(s strategy) bool { return s.name == st.name })}
}

func describeStrategy(st strategy) string {
	switch st.name {
	case strategyKvselect:
		return "3 kvselect nodes with the shipped default policy (" + scheduler.DefaultPolicy + "), replica sync on, /select_and_reserve round-robin over the nodes"
	case strategyKvselectOff:
		return "the same with replica sync off: each node sees only its own bookings"
	case strategyRoundRobin:
		return "request i to engine i mod n"
	case strategyRandom:
		return "uniform random engine"
	case strategyLeastLoaded:
		return "fewest active requests (waiting or running), read from the engines' real queues, which no router has"
	case strategyGreedyPrefix:
		return "knows every cache: longest cached prefix, ties by active requests (a heuristic, not a bound on hit rate)"
	}
	if st.kvselect {
		return "the kvselect nodes of kvselect with " + st.policy + " as their default policy"
	}
	return ""
}

func printRoutingTable(w io.Writer, cfg routingConfig, run *routingRun, targets []routingTarget) {
	fmt.Fprintf(w, "routing on %s: %d requests at %gx, %d workers x %d rank (%s), cache %d blocks of %d tokens, %s time\n",
		filepath.Base(cfg.trace), run.requests, cfg.speed, cfg.workers, cfg.dpSize, describeFleet(cfg.fleet, cfg.workers*cfg.dpSize),
		cfg.engine.CacheBlocks, cfg.engine.BlockSize, map[bool]string{false: "virtual", true: "real"}[cfg.realtime])
	if cfg.busyPrefillTokens > 0 {
		fmt.Fprintf(w, "kvselect busy threshold: %d active prefill tokens per rank\n", cfg.busyPrefillTokens)
	}
	fmt.Fprintf(w, "%-31s %8s %9s %9s %9s %9s %9s %8s %9s %8s %7s %6s\n",
		"strategy", "hit rate", "TTFT p50", "TTFT p90", "TTFT p99", "E2E p50", "E2E p99", "req/s", "imbalance", "503 rate", "goodput", "errors")
	for _, r := range run.results {
		f := r.Figures
		fmt.Fprintf(w, "%-31s %8.3f %9.0f %9.0f %9.0f %9.0f %9.0f %8.2f %9.2f %8.4f %7.3f %6d\n",
			r.Display, f.HitRate, f.TTFTp50, f.TTFTp90, f.TTFTp99, f.E2Ep50, f.E2Ep99, f.Throughput, f.Imbalance, f.RejectRate, r.Goodput.Share, f.Errors)
	}
	fmt.Fprintf(w, "%-31s %8.3f   (the trace's infinite-cache hit rate: every request's longest prefix over all earlier ones, no eviction)\n",
		"bound on hit rate", run.bound)
	fmt.Fprintf(w, "(latencies in ms of virtual time; imbalance = busiest engine's active requests over the mean engine's, integrated over time;\n"+
		" goodput = share of all requests served with TTFT <= %s, 503s counting against it)\n", cfg.goodputTTFT)
	fmt.Fprintf(w, "%-31s %16s %16s %16s\n", "decisions", "longest prefix", "prefix routed to", "longest prefix")
	fmt.Fprintf(w, "%-31s %16s %16s %16s\n", "(at routing)", "% of requests", "% of tokens", "% of tokens")
	for _, r := range run.results {
		f := r.Figures
		fmt.Fprintf(w, "%-31s %16.1f %16.1f %16.1f\n", r.Display, 100*f.LongestPrefixShare, 100*f.RoutedPrefixRate, 100*f.BestPrefixRate)
	}
	printTargets(w, targets)
}

// describeFleet says which engines of n are slow.
func describeFleet(kind string, n int) string {
	slow := slowEngines(kind, n)
	if slow == 0 {
		return "every engine alike"
	}
	return fmt.Sprintf("the last %d of %d engines half as fast", slow, n)
}

func (cfg routingConfig) configJSON() map[string]any {
	return map[string]any{
		"trace": cfg.trace, "offset": cfg.offset, "every": cfg.every, "limit": cfg.limit, "speed": cfg.speed,
		"workers": cfg.workers, "dp_size": cfg.dpSize, "fleet": cfg.fleet, "slow_engines": slowEngines(cfg.fleet, cfg.workers*cfg.dpSize),
		"trace_block_tokens": cfg.traceBlockTokens, "block_size": cfg.engine.BlockSize, "cache_blocks": cfg.engine.CacheBlocks,
		"max_batch_tokens": cfg.engine.MaxBatchTokens, "max_running": cfg.engine.MaxRunning,
		"prefill_per_token_us": float64(cfg.engine.PrefillPerToken) / float64(time.Microsecond),
		"decode_per_token_us":  float64(cfg.engine.DecodePerToken) / float64(time.Microsecond),
		"step_overhead_us":     float64(cfg.engine.StepOverhead) / float64(time.Microsecond),
		"overlap_score_weight": cfg.overlapWeight, "busy_prefill_tokens": cfg.busyPrefillTokens,
		"goodput_ttft_ms": ms(cfg.goodputTTFT), "default_policy": scheduler.DefaultPolicy,
		"seed": cfg.seed, "lifecycle": cfg.lifecycle.String(), "realtime": cfg.realtime,
	}
}

// strategyDoc is a strategy's result as the JSON has it.
type strategyDoc struct {
	*strategyResult
	Description string `json:"description"`
}

func strategyDocs(results []*strategyResult) []strategyDoc {
	var out []strategyDoc
	for _, r := range results {
		out = append(out, strategyDoc{r, r.description})
	}
	return out
}

func writeRoutingJSON(cfg routingConfig, run *routingRun, targets []routingTarget) error {
	doc := struct {
		Generated  string          `json:"generated"`
		GoVersion  string          `json:"go_version"`
		CPUs       int             `json:"cpus"`
		Config     map[string]any  `json:"config"`
		Requests   int             `json:"requests"`
		Bound      float64         `json:"infinite_cache_hit_rate"`
		Strategies []strategyDoc   `json:"strategies"`
		Targets    []routingTarget `json:"targets"`
	}{Generated: time.Now().UTC().Format(time.RFC3339), GoVersion: runtime.Version(), CPUs: runtime.NumCPU(),
		Config: cfg.configJSON(), Requests: run.requests, Bound: run.bound, Strategies: strategyDocs(run.results), Targets: targets}
	return writeJSON(cfg.out, doc)
}
