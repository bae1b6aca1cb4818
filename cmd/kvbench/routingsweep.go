package main

import (
	"flag"
	"fmt"
	"io"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/kvselect/kvselect/scheduler"
)

// The sweep (SPEC §12, make bench-routing-sweep): the routing comparison
// at several speeds, with the kvselect nodes' busy thresholds set, on a
// uniform fleet and on one where a quarter of the engines are half as
// fast; TTFT p90, E2E p99 and goodput per strategy against offered load.

const (
	defaultSweepSpeeds = "2,4,6,8,12"
	defaultSweepFleets = "uniform,hetero"
	// defaultSweepBusyPrefill is the nodes' busy threshold in the sweep:
	// about the goodput bound's worth of prefill on a default engine (2 s
	// at about 50 k tokens/s). A rank further behind would serve a new
	// request past the bound anyway, so a refusal loses nothing and keeps
	// the queue from growing for the requests after it.
	defaultSweepBusyPrefill = 100_000
)

// sweepConfig is what kvbench routing-sweep's command line decides: the
// routing flags, then the points.
type sweepConfig struct {
	routingConfig
	speeds []float64
	fleets []string
}

func parseSweepConfig(args []string, stderr io.Writer) (sweepConfig, error) {
	fs := flag.NewFlagSet("routing-sweep", flag.ContinueOnError)
	fs.SetOutput(stderr)
	c := sweepConfig{}
	parse := routingFlags(fs, &c.routingConfig, routingOutputs{name: "routing-sweep", strategies: "strategies to run at every point",
		picture: "TTFT p90 and goodput against offered load per strategy and fleet"})
	speeds := fs.String("speeds", defaultSweepSpeeds, "speeds to replay the trace at, comma separated (each divides the timestamps)")
	fleets := fs.String("fleets", defaultSweepFleets, "fleets, comma separated: uniform (every engine alike), hetero (the last quarter of the engines, rounded up, half as fast)")
	fs.Uint64Var(&c.busyPrefillTokens, "busy-prefill-tokens", defaultSweepBusyPrefill, "the kvselect nodes' busy threshold, active prefill tokens per rank (0 = none)")
	if err := parse(args); err != nil {
		return c, err
	}
	for _, s := range strings.Split(*speeds, ",") {
		v, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
		if err != nil || !(v > 0) {
			return c, fmt.Errorf("-speeds: %q is not a positive number", s)
		}
		if !slices.Contains(c.speeds, v) {
			c.speeds = append(c.speeds, v)
		}
	}
	slices.Sort(c.speeds)
	for _, f := range strings.Split(*fleets, ",") {
		f = strings.TrimSpace(f)
		if !slices.Contains(fleetKinds, f) {
			return c, fmt.Errorf("-fleets: unknown %q (want uniform, hetero or both)", f)
		}
		if !slices.Contains(c.fleets, f) {
			c.fleets = append(c.fleets, f)
		}
	}
	return c, nil
}

// sweepPoint is the comparison at one (fleet, speed).
type sweepPoint struct {
	Fleet   string  `json:"fleet"`
	Speed   float64 `json:"speed"`
	Offered float64 `json:"offered_rps"`
	// Strategies and Targets are as in routing.json.
	Strategies []strategyDoc     `json:"strategies"`
	Targets    []routingTarget   `json:"targets"`
	results    []*strategyResult // for the tables and the picture
}

func routingSweep(args []string, stdout, stderr io.Writer) error {
	cfg, err := parseSweepConfig(args, stderr)
	if err != nil {
		return err
	}
	ctx, stop := signalContext()
	defer stop()
	reqs, err := loadTrace(cfg.routingConfig)
	if err != nil {
		return err
	}
	start := time.Now()
	var points []*sweepPoint
	var bound float64
	fmt.Fprintf(stdout, "routing sweep on %s: %d requests, %d workers x %d rank, speeds %v, fleets %s, kvselect busy threshold %d active prefill tokens per rank, goodput = share of requests with TTFT <= %s\n",
		filepath.Base(cfg.trace), len(reqs), cfg.workers, cfg.dpSize, cfg.speeds, strings.Join(cfg.fleets, ", "), cfg.busyPrefillTokens, cfg.goodputTTFT)
	for _, fleet := range cfg.fleets {
		for _, speed := range cfg.speeds {
			pc := cfg.routingConfig
			pc.fleet, pc.speed = fleet, speed
			run, err := runRouting(ctx, pc, reqs, fmt.Sprintf("%s %gx: ", fleet, speed), stderr)
			if err != nil {
				return err
			}
			bound = run.bound
			p := &sweepPoint{Fleet: fleet, Speed: speed, results: run.results,
				Targets: routingTargets(run.results, scheduler.DefaultPolicy, true)}
			for _, r := range run.results {
				p.Offered = r.Figures.OfferedRate
				r.ttft, r.replay = nil, nil // the sweep keeps figures only
			}
			p.Strategies = strategyDocs(run.results)
			printSweepPoint(stdout, pc, p)
			points = append(points, p)
		}
	}
	fmt.Fprintf(stdout, "bound on hit rate (the trace's infinite-cache hit rate): %.3f; sweep took %s\n", bound, time.Since(start).Round(time.Second))
	printSweepSummary(stdout, points)
	if cfg.out != "" {
		doc := struct {
			Generated string         `json:"generated"`
			GoVersion string         `json:"go_version"`
			CPUs      int            `json:"cpus"`
			Config    map[string]any `json:"config"`
			Speeds    []float64      `json:"speeds"`
			Fleets    []string       `json:"fleets"`
			Requests  int            `json:"requests"`
			Bound     float64        `json:"infinite_cache_hit_rate"`
			WallS     float64        `json:"wall_s"`
			Points    []*sweepPoint  `json:"points"`
		}{time.Now().UTC().Format(time.RFC3339), runtime.Version(), runtime.NumCPU(), cfg.configJSON(), cfg.speeds, cfg.fleets,
			len(reqs), bound, time.Since(start).Seconds(), points}
		delete(doc.Config, "speed")
		delete(doc.Config, "fleet")
		delete(doc.Config, "slow_engines")
		if err := writeJSON(cfg.out, doc); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "results: %s\n", cfg.out)
	}
	if err := writePicture(stdout, cfg.picture, func(path string) error { return drawSweep(path, points, cfg.goodputTTFT) }); err != nil {
		return err
	}
	for _, p := range points {
		if err := failedChecks(p.results); err != nil {
			return fmt.Errorf("%s %gx: %w", p.Fleet, p.Speed, err)
		}
	}
	if cfg.gate {
		var all []routingTarget
		for _, p := range points {
			for _, t := range p.Targets {
				t.Name = fmt.Sprintf("%s %gx: %s", p.Fleet, p.Speed, t.Name)
				all = append(all, t)
			}
		}
		return gateTargets(all)
	}
	return nil
}

func printSweepPoint(w io.Writer, cfg routingConfig, p *sweepPoint) {
	fmt.Fprintf(w, "\n%s fleet (%s), %gx: %.2f requests/s offered\n", p.Fleet, describeFleet(p.Fleet, cfg.workers*cfg.dpSize), p.Speed, p.Offered)
	fmt.Fprintf(w, "%-31s %9s %9s %9s %8s %8s %8s %8s\n", "strategy", "TTFT p90", "TTFT p99", "E2E p99", "goodput", "good/s", "503 rate", "hit rate")
	for _, r := range p.results {
		f := r.Figures
		fmt.Fprintf(w, "%-31s %9.0f %9.0f %9.0f %8.3f %8.2f %8.4f %8.3f\n",
			r.Display, f.TTFTp90, f.TTFTp99, f.E2Ep99, r.Goodput.Share, r.Goodput.Rate, f.RejectRate, f.HitRate)
	}
	printTargets(w, p.Targets)
}

// printSweepSummary says, per target, at how many points kvselect met it:
// SPEC §12 wants the best curve at every load.
func printSweepSummary(w io.Writer, points []*sweepPoint) {
	type tally struct{ met, checked int }
	var names []string
	by := map[string]*tally{}
	for _, p := range points {
		for _, t := range p.Targets {
			if t.Skipped {
				continue
			}
			if by[t.Name] == nil {
				by[t.Name] = &tally{}
				names = append(names, t.Name)
			}
			by[t.Name].checked++
			if t.Met {
				by[t.Name].met++
			}
		}
	}
	if len(names) == 0 {
		return
	}
	fmt.Fprintln(w, "\nkvselect's targets over the sweep:")
	for _, n := range names {
		fmt.Fprintf(w, "  %-42s met at %d of %d points\n", n, by[n].met, by[n].checked)
	}
}
