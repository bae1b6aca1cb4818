package jepsen

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"sync"
	"time"

	"github.com/kvselect/kvselect/internal/poll"
	"github.com/kvselect/kvselect/kvsim"
)

// RunConfig is one scenario: a fresh cluster, the workload, and one
// nemesis injected and healed in cycles for Duration.
type RunConfig struct {
	// Bin holds the kvselect and kvsim binaries; Dir the run's files.
	Bin, Dir string
	Nemesis  Nemesis
	Duration time.Duration
	// Quiet and Fault are how long each cycle runs without and with the
	// fault (defaults 3 s and 5 s).
	Quiet, Fault time.Duration
	// LeaderBound is how long the cluster may be without a leader after a
	// heal (default 15 s).
	LeaderBound time.Duration
	Logger      *slog.Logger
}

// catalogIDs are the worker ids the catalog clients contend on; kvsim's
// workers are 1..Workers and the clients' fresh ids come after these.
var catalogIDs = []uint64{1001, 1002, 1003, 1004}

// Workload sizes: concurrent catalog clients and lease clients.
const (
	catalogClients = 4
	leaseClients   = 2
)

// Run runs one scenario and checks it. The workload (catalog, selection,
// lease and threshold clients, and kvsim serving prompts) runs while the
// nemesis is injected and healed in cycles for Duration, then while one
// follower is removed and added back (a membership change in every
// scenario). Then the clients stop, every fault is undone, the bookings
// the clients could not confirm freed are freed (SweepBookings), and the
// checks run: every load back to zero within LoadsZeroBound, every lease
// lapsed, the linearizability of the catalog ops (worker records and
// thresholds, exact answers), no lost write, the same catalog and index
// on every node; the summary judges selection availability, busy
// answers, leases and the minimum of work (RunSummary.Failures). The
// cluster is closed before Run returns; its files (history, nemesis
// events, timeline, summary, node logs) stay in Dir.
func Run(ctx context.Context, cfg RunConfig) (RunSummary, error) {
	if cfg.Quiet <= 0 {
		cfg.Quiet = 3 * time.Second
	}
	if cfg.Fault <= 0 {
		cfg.Fault = 5 * time.Second
	}
	if cfg.LeaderBound <= 0 {
		cfg.LeaderBound = 15 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	name := cfg.Nemesis.Name()
	base := time.Now()
	c, err := StartCluster(ctx, Config{Bin: cfg.Bin, Dir: cfg.Dir, Nodes: 3, Workers: 3, Model: ThresholdModel, Base: base, Logger: cfg.Logger})
	if err != nil {
		return RunSummary{Nemesis: name}, err
	}
	defer c.Close()

	h := NewHistory()
	open := NewOpenBookings()
	ep := c.Endpoints()
	load, stopLoad := context.WithCancel(ctx)
	loads := []func() error{
		func() error { return RunCatalogClients(load, ep, base, catalogClients, catalogIDs, h) },
		func() error { return RunSelectionClients(load, ep, base, h, open) },
		func() error { return RunLeaseClients(load, ep, base, leaseClients, h) },
		func() error { return RunThresholdClient(load, ep, base, c.SimRanks(), h, open) },
		func() error { return servePrompts(load, c.Sim(), c.WorkerIDs()) },
	}
	var wg sync.WaitGroup
	loadErrs := make([]error, len(loads))
	for i, f := range loads {
		wg.Go(func() { loadErrs[i] = f() })
	}
	started := time.Now()

	var problems []string
	cycle := func(n Nemesis, fault time.Duration) {
		if err := n.Inject(ctx, c); err != nil {
			problems = append(problems, fmt.Sprintf("%s inject: %v", n.Name(), err))
		}
		_ = poll.Sleep(ctx, fault)
		if err := n.Heal(ctx, c); err != nil {
			problems = append(problems, fmt.Sprintf("%s heal: %v", n.Name(), err))
		}
		healed := time.Now()
		wctx, cancel := context.WithTimeout(ctx, cfg.LeaderBound)
		if _, err := c.WaitLeader(wctx, nil); err != nil {
			problems = append(problems, fmt.Sprintf("no leader within %v of a heal: %v", cfg.LeaderBound, err))
		} else {
			c.RecordEvent(n.Name(), "leader", fmt.Sprintf("a leader %v after the heal", time.Since(healed).Round(time.Millisecond)))
		}
		cancel()
	}
	deadline := time.Now().Add(cfg.Duration)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		if poll.Sleep(ctx, cfg.Quiet) != nil {
			break
		}
		cycle(cfg.Nemesis, cfg.Fault)
	}
	// The membership change of the workload, under load, with the
	// nemesis healed.
	member := &memberRemoveRejoin{}
	if ctx.Err() == nil && poll.Sleep(ctx, cfg.Quiet) == nil {
		cycle(member, 0)
	}
	memberChanges := member.Changes()
	if n, ok := cfg.Nemesis.(*memberRemoveRejoin); ok {
		memberChanges += n.Changes()
	}
	stopLoad()
	wg.Wait()
	ran := time.Since(started)
	for _, err := range loadErrs {
		if err != nil && !errors.Is(err, context.Canceled) {
			problems = append(problems, fmt.Sprintf("workload: %v", err))
		}
	}

	rctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if err := c.Recover(rctx); err != nil {
		problems = append(problems, fmt.Sprintf("recover: %v", err))
	}
	// The heal: from here every node must shed its load within
	// LoadsZeroBound (anti-entropy drops what replica sync lost), once
	// the harness has settled its own unknowns.
	if err := SweepBookings(rctx, ep, base, h, open); err != nil {
		problems = append(problems, err.Error())
	}
	// Both bounds run from the heal, side by side.
	var loadsZero, leasesLapsed error
	var checks sync.WaitGroup
	checks.Go(func() { loadsZero = CheckLoadsZero(ctx, ep, LoadsZeroBound) })
	checks.Go(func() { leasesLapsed = CheckLeasesLapse(ctx, ep, LeaseTTL+LeaseLapseBound) })
	checks.Wait()

	ops := h.Ops()
	events := c.Events()
	sum := Summarize(name, ops, c.Size(), windows(events))
	sum.Duration, sum.MemberChanges = ran, memberChanges
	sum.LoadsZero = sum.Converged(loadsZero)
	if loadsZero != nil {
		// Say which frees were lost, and where, for the post-mortem.
		left, err := LeftBookings(rctx, ep)
		if err != nil {
			problems = append(problems, err.Error())
		}
		problems = append(problems, ExplainLeft(ops, windows(events), left)...)
	}
	sum.LeasesLapsed = sum.Converged(leasesLapsed)
	check := CheckCatalogLinearizable(ops, DefaultCheckTimeout)
	sum.SetCatalogCheck(check)
	if final, thresholds, err := FetchCatalog(rctx, ep); err != nil {
		problems = append(problems, fmt.Sprintf("final catalog: %v", err))
	} else {
		sum.SetLostWrites(CheckNoLostWrites(ops, final, thresholds))
	}
	converge := func(f func(context.Context) error) Verdict {
		cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		return sum.Converged(f(cctx))
	}
	sum.CatalogConverged = converge(func(ctx context.Context) error { return CheckCatalogConverged(ctx, ep) })
	sum.IndexConverged = converge(func(ctx context.Context) error {
		return CheckIndexConverged(ctx, ep, append(SelectionPrompts(), c.IndexProbes()...))
	})
	sum.Problems = append(sum.Problems, problems...)

	if err := WriteRun(cfg.Dir, ops, events, windows(events), &check, sum); err != nil {
		return sum, err
	}
	return sum, nil
}

// windows pairs each inject with the heal that follows it.
func windows(events []NemesisEvent) []Window {
	var out []Window
	var open *Window
	for _, e := range events {
		switch e.Phase {
		case PhaseInject:
			open = &Window{Name: e.Nemesis, Start: e.Time, Detail: e.Detail, Down: e.Down}
		case PhaseHeal:
			if open != nil {
				open.End = e.Time
				out = append(out, *open)
				open = nil
			}
		}
	}
	return out
}

// servePrompts keeps kvsim's workers publishing KV events all through a
// run: each worker in turn serves one of the selection prompts or (one
// time in three) a prompt no one else uses, which with SimCacheBlocks
// evicts older blocks. The index then keeps changing, so a node that
// misses events diverges unless it recovers them. The workload never
// clears a cache: a clear would wipe a divergence before the index check
// could see it (clears are covered by ingest's tests and the soak).
// kvsim may be unreachable for a moment; that is not a failure.
func servePrompts(ctx context.Context, sim *kvsim.ControlClient, workers []uint64) error {
	prompts := SelectionPrompts()
	for i := 0; ; i++ {
		toks := prompts[i%len(prompts)].TokenIDs
		if i%3 == 2 {
			toks = make([]uint32, 128)
			for j := range toks {
				toks[j] = uint32(1_000_000 + 1000*i + j)
			}
		}
		// kvsim may be busy for a moment; the next call tries again.
		_, _ = sim.Prompt(ctx, workers[i%len(workers)], 0, toks)
		if poll.Sleep(ctx, 100*time.Millisecond) != nil {
			return nil
		}
	}
}

// RunDir is where scenario name's files go under root.
func RunDir(root, name string) string { return filepath.Join(root, name) }
