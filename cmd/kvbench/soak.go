package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/kvselect/kvselect/client"
)

// soakConfig is what the soak's command line decides.
type soakConfig struct {
	bin         string
	duration    time.Duration // load time, warm-up included
	warmup      time.Duration
	sampleEvery time.Duration
	progress    time.Duration
	rate        float64 // flows per second, over every node
	concurrency int
	hold        int
	cacheBlocks int
	churnEvery  time.Duration
	restart     time.Duration
	engineEvery time.Duration
	out         string
	keep        bool
	seed        uint64
	tol         tolerance
	maxErrRatio float64
}

// tolerance is what "flat" allows: the end figure may exceed the start
// figure by Factor, plus an absolute slack per figure. The factor absorbs
// the Go heap's sawtooth (a GC cycle lets the heap grow to twice the live
// data, and a scrape lands anywhere in it) and allocator fragmentation;
// the slacks absorb small baselines, where a few MiB or a reconnect in
// flight are a large fraction but no trend. A leak proportional to the
// traffic (per request, reservation, churn cycle or restart) grows with
// the run's length and crosses both on a 10-minute run.
type tolerance struct {
	Factor         float64 `json:"factor"`
	RSSSlack       int64   `json:"rss_slack_bytes"`
	HeapSlack      int64   `json:"heap_slack_bytes"`
	GoroutineSlack int64   `json:"goroutine_slack"`
}

// soakWindow is how many consecutive samples the start and end figures
// take the median of, so one scrape in a GC peak does not decide.
const soakWindow = 3

func parseSoakConfig(args []string, stderr io.Writer) (soakConfig, error) {
	fs := flag.NewFlagSet("soak", flag.ContinueOnError)
	fs.SetOutput(stderr)
	c := soakConfig{}
	fs.StringVar(&c.bin, "bin", "bin", "directory holding the kvselect and kvsim binaries")
	fs.DurationVar(&c.duration, "duration", 10*time.Minute, "how long the load runs, warm-up included")
	fs.DurationVar(&c.warmup, "warmup", 0, "load before the start figures are taken (0: a quarter of -duration, at most 30s)")
	fs.DurationVar(&c.sampleEvery, "sample", 2*time.Second, "how often each node's RSS, heap and goroutines are sampled")
	fs.DurationVar(&c.progress, "progress", 30*time.Second, "how often a progress line is printed")
	fs.Float64Var(&c.rate, "rate", 40, "flows per second over all nodes (each is 2-5 kvselect calls and a kvsim prompt)")
	fs.IntVar(&c.concurrency, "concurrency", 8, "goroutines running flows")
	fs.IntVar(&c.hold, "hold", 4, "bookings each goroutine keeps open before freeing the oldest")
	fs.IntVar(&c.cacheBlocks, "cache-blocks", 256, "kvsim KV cache per rank, in blocks (bounds the index)")
	fs.DurationVar(&c.churnEvery, "churn-every", 5*time.Second, "catalog churn cycle: delete, re-add, patch a worker through different nodes")
	fs.DurationVar(&c.restart, "restart-every", 40*time.Second, "kill and restart one kvsim process, in turn")
	fs.DurationVar(&c.engineEvery, "engine-every", 10*time.Second, "restart one worker's engine or clear its cache, in turn")
	fs.StringVar(&c.out, "out", "bench/results/soak.json", "JSON results file ('' for none)")
	fs.BoolVar(&c.keep, "keep", false, "keep the logs and data dirs even when the soak passes")
	fs.Uint64Var(&c.seed, "seed", 1, "seed of the prompts and the choices of nodes")
	fs.Float64Var(&c.tol.Factor, "flat-factor", 1.25, "flat: end <= start x factor + slack")
	rssSlack := fs.Int("rss-slack-mib", 16, "flat: RSS slack in MiB")
	heapSlack := fs.Int("heap-slack-mib", 8, "flat: Go heap (in use) slack in MiB")
	fs.Int64Var(&c.tol.GoroutineSlack, "goroutine-slack", 20, "flat: goroutine slack")
	fs.Float64Var(&c.maxErrRatio, "max-error-ratio", 0.001, "fail when errors exceed this fraction of the operations")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	if fs.NArg() > 0 {
		return c, fmt.Errorf("unexpected arguments: %q", fs.Args())
	}
	c.tol.RSSSlack, c.tol.HeapSlack = int64(*rssSlack)<<20, int64(*heapSlack)<<20
	if c.warmup == 0 {
		c.warmup = min(30*time.Second, c.duration/4)
	}
	switch {
	case c.rate <= 0 || c.concurrency < 1 || c.hold < 0 || c.cacheBlocks < 1:
		return c, errors.New("-rate, -concurrency and -cache-blocks must be positive, -hold not negative")
	case c.sampleEvery <= 0 || c.progress <= 0 || c.churnEvery <= 0 || c.restart <= 0 || c.engineEvery <= 0:
		return c, errors.New("-sample, -progress, -churn-every, -restart-every and -engine-every must be positive")
	case c.warmup+time.Duration(2*soakWindow)*c.sampleEvery > c.duration:
		return c, fmt.Errorf("-duration %v leaves no room for %d samples after a %v warm-up", c.duration, 2*soakWindow, c.warmup)
	case c.tol.Factor < 1:
		return c, errors.New("-flat-factor must be at least 1")
	}
	return c, nil
}

// nodeFigs are one node's memory and goroutines at one time.
type nodeFigs struct {
	RSS        int64 `json:"rss_bytes"`
	HeapInuse  int64 `json:"heap_inuse_bytes"`
	Goroutines int64 `json:"goroutines"`
}

type soakSample struct {
	T    float64 `json:"t_s"` // since the load started
	Node string  `json:"node"`
	nodeFigs
}

// nodeVerdict compares a node's start and end figures.
type nodeVerdict struct {
	Node  string   `json:"node"`
	Start nodeFigs `json:"start"`
	End   nodeFigs `json:"end"`
	Flat  bool     `json:"flat"`
	Over  []string `json:"over,omitempty"` // the figures past tolerance
}

// flatVerdict checks end <= start x factor + slack for each figure.
func flatVerdict(node string, start, end nodeFigs, tol tolerance) nodeVerdict {
	v := nodeVerdict{Node: node, Start: start, End: end, Flat: true}
	check := func(name string, s, e, slack int64) {
		if limit := int64(math.Ceil(float64(s)*tol.Factor)) + slack; e > limit {
			v.Flat = false
			v.Over = append(v.Over, fmt.Sprintf("%s %d > %d (start %d x %.2f + %d)", name, e, limit, s, tol.Factor, slack))
		}
	}
	check("rss", start.RSS, end.RSS, tol.RSSSlack)
	check("heap_inuse", start.HeapInuse, end.HeapInuse, tol.HeapSlack)
	check("goroutines", start.Goroutines, end.Goroutines, tol.GoroutineSlack)
	return v
}

// medianFigures is the per-figure median of a window of samples.
func medianFigures(ss []soakSample) nodeFigs {
	med := func(get func(soakSample) int64) int64 {
		vs := make([]int64, len(ss))
		for i, s := range ss {
			vs[i] = get(s)
		}
		slices.Sort(vs)
		return vs[len(vs)/2]
	}
	return nodeFigs{
		RSS:        med(func(s soakSample) int64 { return s.RSS }),
		HeapInuse:  med(func(s soakSample) int64 { return s.HeapInuse }),
		Goroutines: med(func(s soakSample) int64 { return s.Goroutines }),
	}
}

// windows returns a node's start window (the first soakWindow samples
// taken after warm-up) and end window (the last soakWindow samples).
func windows(ss []soakSample, node string, warmup time.Duration) (start, end []soakSample, ok bool) {
	var mine []soakSample
	for _, s := range ss {
		if s.Node == node {
			mine = append(mine, s)
		}
	}
	i := slices.IndexFunc(mine, func(s soakSample) bool { return s.T >= warmup.Seconds() })
	if i < 0 || len(mine)-i < 2*soakWindow {
		return nil, nil, false
	}
	return mine[i : i+soakWindow], mine[len(mine)-soakWindow:], true
}

// soakResult is bench/results/soak.json.
type soakResult struct {
	Generated   string                        `json:"generated"`
	GoVersion   string                        `json:"go_version"`
	CPUs        int                           `json:"cpus"`
	DurationS   float64                       `json:"duration_s"`
	WarmupS     float64                       `json:"warmup_s"`
	RateTarget  float64                       `json:"rate_flows_per_s"`
	Concurrency int                           `json:"concurrency"`
	Layout      string                        `json:"layout"`
	Tolerance   tolerance                     `json:"tolerance"`
	MaxErrRatio float64                       `json:"max_error_ratio"`
	Interrupted bool                          `json:"interrupted"`
	Stats       statsSnapshot                 `json:"stats"`
	Nodes       []nodeVerdict                 `json:"nodes"`
	Counters    map[string]map[string]float64 `json:"counters"`
	LoadsZero   bool                          `json:"loads_back_to_zero"`
	// IndexDivergence lists the worker ranks whose blocks differ between
	// the nodes at the end; IndexCompareError says why they could not be
	// compared.
	IndexDivergence   []string     `json:"index_divergence"`
	IndexCompareError string       `json:"index_compare_error,omitempty"`
	Samples           []soakSample `json:"samples"`
	Pass              bool         `json:"pass"`
	Reasons           []string     `json:"reasons,omitempty"`
	LogDir            string       `json:"log_dir,omitempty"`
}

// soak runs the whole soak and returns an error when it fails.
func soak(args []string, stdout, stderr io.Writer) error {
	cfg, err := parseSoakConfig(args, stderr)
	if err != nil {
		return err
	}
	ctx, stopSignals := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stopSignals()
	logf := func(format string, a ...any) {
		fmt.Fprintf(stdout, "soak: "+format+"\n", a...)
	}
	for _, b := range []string{"kvselect", "kvsim"} {
		if _, err := os.Stat(filepath.Join(cfg.bin, b)); err != nil {
			return fmt.Errorf("%s: %w (run make build)", b, err)
		}
	}

	f := &fleet{logf: logf}
	defer f.stopAll() // every child is reaped, whatever happens below
	if err := startFleet(ctx, cfg.bin, cfg.cacheBlocks, f); err != nil {
		return fmt.Errorf("start: %w (logs in %s)", err, f.dir)
	}
	st := newSoakStats()
	l := newLoad(f, st, cfg.hold, cfg.seed)
	if err := l.registerChurn(ctx); err != nil {
		return fmt.Errorf("start: %w (logs in %s)", err, f.dir)
	}
	layout := "3 kvselect nodes; kvsim workers 1-2 (dp 1), 3-4 (dp 2), 5 (dp 4), churned worker 1000+ (dp 2); 12 ranks"
	logf("%s", layout)
	logf("load for %v (warm-up %v): %.0f flows/s on %d goroutines, catalog churn every %v, a kvsim process restart every %v, an engine restart or cache clear every %v",
		cfg.duration, cfg.warmup, cfg.rate, cfg.concurrency, cfg.churnEvery, cfg.restart, cfg.engineEvery)

	res := soakResult{Generated: time.Now().UTC().Format(time.RFC3339), GoVersion: runtime.Version(), CPUs: runtime.NumCPU(),
		WarmupS: cfg.warmup.Seconds(), RateTarget: cfg.rate, Concurrency: cfg.concurrency, Layout: layout,
		Tolerance: cfg.tol, MaxErrRatio: cfg.maxErrRatio, LogDir: f.dir}
	start := time.Now()
	loadCtx, stopLoad := context.WithTimeout(ctx, cfg.duration)
	defer stopLoad()
	drain, stopDrain := context.WithTimeout(context.Background(), cfg.duration+time.Minute)
	defer stopDrain()

	var wg sync.WaitGroup
	goLoop := func(fn func()) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			fn()
		}()
	}
	tick := time.NewTicker(time.Duration(float64(time.Second) / cfg.rate))
	defer tick.Stop()
	for i := range cfg.concurrency {
		goLoop(func() { l.runFlows(loadCtx, drain, tick.C, cfg.seed*1000+uint64(i)) })
	}
	goLoop(func() { l.churnLoop(loadCtx, cfg.churnEvery) })
	goLoop(func() { l.restartLoop(loadCtx, cfg.restart) })
	goLoop(func() { l.engineLoop(loadCtx, cfg.engineEvery, cfg.seed) })

	samples, died := sampleUntil(loadCtx, f, st, start, cfg, logf)
	stopLoad()
	interrupted := ctx.Err() != nil
	stopSignals() // a second Ctrl-C ends the soak at once; Pdeathsig takes the children
	wg.Wait()
	res.DurationS = time.Since(start).Seconds()
	res.Samples = samples
	res.Interrupted = interrupted

	// Every booking is freed by now: every node's load must come back to
	// zero (replica sync carries the frees booked elsewhere). Deleting the
	// churn worker first drops what its churn races left behind.
	idleErr := l.retireChurn(context.Background())
	if idleErr == nil {
		idleErr = l.waitIdle(context.Background(), 15*time.Second)
	}
	res.LoadsZero = idleErr == nil
	// Every node follows every worker, so once the traffic has stopped
	// their indexes should hold the same blocks. A difference is reported
	// (a correctness finding, not a memory one) without failing the soak.
	if div, err := l.indexDivergence(context.Background()); err != nil {
		res.IndexCompareError = err.Error()
	} else {
		res.IndexDivergence = div
	}
	res.Counters = finalCounters(f)
	res.Stats = st.snapshot()

	if interrupted {
		res.Reasons = append(res.Reasons, "interrupted")
	}
	if died != "" {
		res.Reasons = append(res.Reasons, died)
	}
	if idleErr != nil {
		res.Reasons = append(res.Reasons, "load not back to zero: "+idleErr.Error())
	}
	allowed := int64(math.Floor(cfg.maxErrRatio * float64(res.Stats.Requests)))
	if res.Stats.Errors > allowed {
		res.Reasons = append(res.Reasons, fmt.Sprintf("%d errors > %d allowed (%.2f%% of %d operations)",
			res.Stats.Errors, allowed, 100*cfg.maxErrRatio, res.Stats.Requests))
	}
	for _, node := range f.nodes {
		s, e, ok := windows(samples, node.id, cfg.warmup)
		if !ok {
			res.Reasons = append(res.Reasons, node.id+": too few samples after warm-up to judge flatness")
			continue
		}
		v := flatVerdict(node.id, medianFigures(s), medianFigures(e), cfg.tol)
		if !v.Flat {
			res.Reasons = append(res.Reasons, node.id+" not flat: "+strings.Join(v.Over, "; "))
		}
		res.Nodes = append(res.Nodes, v)
	}
	res.Pass = len(res.Reasons) == 0
	printSoakReport(stdout, &res, allowed)

	f.stopAll()
	if res.Pass && !cfg.keep {
		os.RemoveAll(f.dir)
		res.LogDir = ""
	}
	if cfg.out != "" {
		if err := writeJSON(cfg.out, &res); err != nil {
			return err
		}
		logf("results in %s", cfg.out)
	}
	if !res.Pass {
		return fmt.Errorf("FAIL: %s (logs and data in %s)", strings.Join(res.Reasons, "; "), f.dir)
	}
	return nil
}

// sampleUntil samples every node's figures every cfg.sampleEvery and
// prints a progress line every cfg.progress, until ctx ends or a node
// dies (then it says which).
func sampleUntil(ctx context.Context, f *fleet, st *soakStats, start time.Time, cfg soakConfig, logf func(string, ...any)) ([]soakSample, string) {
	var out []soakSample
	t := time.NewTicker(cfg.sampleEvery)
	defer t.Stop()
	nextProgress := cfg.progress
	for {
		select {
		case <-ctx.Done():
			return out, ""
		case <-t.C:
		}
		el := time.Since(start)
		latest := map[string]nodeFigs{}
		for _, node := range f.nodes {
			fig, err := nodeFigures(ctx, node)
			if ctx.Err() != nil {
				return out, ""
			}
			if err != nil {
				if _, ok := node.proc.Running(); !ok {
					return out, fmt.Sprintf("%s died: %v (see %s)", node.id, node.proc.ExitErr(), node.proc.LogPath)
				}
				st.record(ctx, "metrics", err, false)
				continue
			}
			st.record(ctx, "metrics", nil, false)
			out = append(out, soakSample{T: el.Seconds(), Node: node.id, nodeFigs: fig})
			latest[node.id] = fig
		}
		if el >= nextProgress {
			nextProgress += cfg.progress
			snap := st.snapshot()
			line := fmt.Sprintf("[%4.0fs] ops %d (%.0f/s) errors %d tolerated %d churn %d restarts %d |",
				el.Seconds(), snap.Requests, float64(snap.Requests)/el.Seconds(), snap.Errors, snap.Tolerated,
				snap.Events["catalog_churn_cycles"], snap.Events["kvsim_process_restarts"])
			for _, node := range f.nodes {
				if fig, ok := latest[node.id]; ok {
					line += fmt.Sprintf(" %s rss %s heap %s gor %d |", node.id, mib(fig.RSS), mib(fig.HeapInuse), fig.Goroutines)
				}
			}
			logf("%s", strings.TrimSuffix(line, " |"))
		}
	}
}

// nodeFigures reads a node's RSS from /proc and its Go heap and
// goroutines from its /metrics.
func nodeFigures(ctx context.Context, node *soakNode) (nodeFigs, error) {
	pid, ok := node.proc.Running()
	if !ok {
		return nodeFigs{}, fmt.Errorf("%s is not running", node.id)
	}
	rss, err := vmRSS(pid)
	if err != nil {
		return nodeFigs{}, err
	}
	fams, err := scrape(ctx, node.cl)
	if err != nil {
		return nodeFigs{}, err
	}
	heap, ok1 := familySum(fams, "go_memstats_heap_inuse_bytes")
	gor, ok2 := familySum(fams, "go_goroutines")
	if !ok1 || !ok2 {
		return nodeFigs{}, fmt.Errorf("%s: /metrics lacks go_memstats_heap_inuse_bytes or go_goroutines", node.id)
	}
	return nodeFigs{RSS: rss, HeapInuse: int64(heap), Goroutines: int64(gor)}, nil
}

// scrape fetches and parses a node's /metrics.
func scrape(ctx context.Context, cl *client.Client) (map[string]*dto.MetricFamily, error) {
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	text, err := cl.Metrics(ctx)
	if err != nil {
		return nil, err
	}
	p := expfmt.NewTextParser(model.LegacyValidation)
	return p.TextToMetricFamilies(strings.NewReader(text))
}

// familySum is the sum of a counter's, gauge's or untyped family's series.
func familySum(fams map[string]*dto.MetricFamily, name string) (float64, bool) {
	fam, ok := fams[name]
	if !ok {
		return 0, false
	}
	var sum float64
	for _, m := range fam.GetMetric() {
		sum += metricValue(m)
	}
	return sum, true
}

func metricValue(m *dto.Metric) float64 {
	switch {
	case m.Counter != nil:
		return m.Counter.GetValue()
	case m.Gauge != nil:
		return m.Gauge.GetValue()
	case m.Untyped != nil:
		return m.Untyped.GetValue()
	}
	return 0
}

// soakCounters are the families whose series the report keeps per node:
// what the traffic did and what was lost on the way.
var soakCounters = []string{
	"kvselect_selections_total", "kvselect_kv_events_applied_total", "kvselect_kv_messages_total",
	"kvselect_kv_messages_lost_total", "kvselect_kv_events_dropped_total", "kvselect_kv_replays_total",
	"kvselect_replica_sync_sent_events_total", "kvselect_replica_sync_send_dropped_total",
	"kvselect_replica_sync_received_events_total", "kvselect_replica_sync_dropped_messages_total",
	"kvselect_replica_sync_dropped_events_total", "kvselect_raft_leader_changes_total",
	"kvselect_reservations_expired_total", "kvselect_index_blocks", "kvselect_index_memberships",
}

// finalCounters reads soakCounters' non-zero series from every node.
func finalCounters(f *fleet) map[string]map[string]float64 {
	out := map[string]map[string]float64{}
	for _, node := range f.nodes {
		fams, err := scrape(context.Background(), node.cl)
		if err != nil {
			continue
		}
		m := map[string]float64{}
		for _, name := range soakCounters {
			for _, s := range fams[name].GetMetric() {
				if v := metricValue(s); v != 0 {
					m[seriesName(name, s)] = v
				}
			}
		}
		out[node.id] = m
	}
	return out
}

// seriesName is name{label="value",...} in the label order of the scrape.
func seriesName(name string, m *dto.Metric) string {
	if len(m.GetLabel()) == 0 {
		return name
	}
	var parts []string
	for _, lp := range m.GetLabel() {
		parts = append(parts, fmt.Sprintf("%s=%q", lp.GetName(), lp.GetValue()))
	}
	return name + "{" + strings.Join(parts, ",") + "}"
}

func mib(b int64) string { return fmt.Sprintf("%.1fM", float64(b)/(1<<20)) }

func printSoakReport(w io.Writer, r *soakResult, allowed int64) {
	s := r.Stats
	fmt.Fprintf(w, "\nsoak: %.0fs of load (warm-up %.0fs), %d operations (%.0f/s), %d flows\n",
		r.DurationS, r.WarmupS, s.Requests, float64(s.Requests)/r.DurationS, s.Events["flows"])
	fmt.Fprint(w, "  by operation:")
	for _, k := range sortedKeys(s.ByOp) {
		fmt.Fprintf(w, " %s %d", k, s.ByOp[k])
	}
	fmt.Fprintf(w, "\n  errors: %d (allowed %d = %.2f%%)", s.Errors, allowed, 100*r.MaxErrRatio)
	for _, k := range sortedKeys(s.ErrorKinds) {
		fmt.Fprintf(w, " %s %d", k, s.ErrorKinds[k])
	}
	fmt.Fprintf(w, "\n  tolerated (bookings on the churned worker lost to its delete): %d", s.Tolerated)
	for _, k := range sortedKeys(s.Tolerations) {
		fmt.Fprintf(w, " %s %d", k, s.Tolerations[k])
	}
	fmt.Fprint(w, "\n  events:")
	for _, k := range sortedKeys(s.Events) {
		fmt.Fprintf(w, " %s %d", k, s.Events[k])
	}
	fmt.Fprintln(w)
	for _, e := range s.FirstErrors {
		fmt.Fprintf(w, "  error: %s\n", e)
	}
	fmt.Fprintf(w, "  flat means end <= start x %.2f + slack (RSS %s, heap %s, %d goroutines); start = median of the first %d samples after warm-up, end = median of the last %d\n",
		r.Tolerance.Factor, mib(r.Tolerance.RSSSlack), mib(r.Tolerance.HeapSlack), r.Tolerance.GoroutineSlack, soakWindow, soakWindow)
	fmt.Fprintf(w, "  %-4s %-22s %-22s %-14s %s\n", "node", "RSS start -> end", "heap start -> end", "goroutines", "flat")
	for _, v := range r.Nodes {
		fmt.Fprintf(w, "  %-4s %-22s %-22s %-14s %v\n", v.Node,
			mib(v.Start.RSS)+" -> "+mib(v.End.RSS), mib(v.Start.HeapInuse)+" -> "+mib(v.End.HeapInuse),
			fmt.Sprintf("%d -> %d", v.Start.Goroutines, v.End.Goroutines), v.Flat)
	}
	fmt.Fprintf(w, "  every node's load back to zero after the last free: %v\n", r.LoadsZero)
	switch {
	case r.IndexCompareError != "":
		fmt.Fprintf(w, "  WARNING: could not compare the nodes' indexes: %s\n", r.IndexCompareError)
	case len(r.IndexDivergence) > 0:
		fmt.Fprintf(w, "  WARNING: the nodes' indexes differ at the end (not part of the verdict):\n")
		for _, d := range r.IndexDivergence {
			fmt.Fprintf(w, "    %s\n", d)
		}
	default:
		fmt.Fprintln(w, "  every node's index holds the same blocks per worker rank at the end")
	}
	if r.Pass {
		fmt.Fprintln(w, "soak: PASS")
	} else {
		fmt.Fprintf(w, "soak: FAIL: %s\n", strings.Join(r.Reasons, "; "))
	}
}

func writeJSON(path string, v any) error {
	raw, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return os.WriteFile(path, append(raw, '\n'), 0o644)
}

// writePicture has draw write the picture at path, its directory made
// first, and says where on stdout; an empty path writes none.
func writePicture(stdout io.Writer, path string, draw func(path string) error) error {
	if path == "" {
		return nil
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	if err := draw(path); err != nil {
		return fmt.Errorf("picture: %w", err)
	}
	fmt.Fprintf(stdout, "picture: %s\n", path)
	return nil
}
