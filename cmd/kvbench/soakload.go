package main

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kvselect/kvselect/api"
	"github.com/kvselect/kvselect/client"
	"github.com/kvselect/kvselect/internal/poll"
	"github.com/kvselect/kvselect/kvsim"
)

// soakStats counts what the soak did, by operation, and what failed, by
// kind ("<op>:<api code>", or ":transport" when no node answered).
// Tolerated failures are races the soak provokes on purpose (a booking on
// a worker the catalog churn removed meanwhile); they are counted apart
// and do not count against the error threshold.
type soakStats struct {
	mu          sync.Mutex
	requests    map[string]int64
	errors      map[string]int64
	tolerated   map[string]int64
	events      map[string]int64
	firstErrors []string
}

func newSoakStats() *soakStats {
	return &soakStats{requests: map[string]int64{}, errors: map[string]int64{},
		tolerated: map[string]int64{}, events: map[string]int64{}}
}

// maxErrorSamples bounds the error messages kept for the report.
const maxErrorSamples = 20

// record counts one operation and reports whether it succeeded. A failure
// caused by the soak's own shutdown (ctx ended) is not counted at all.
func (s *soakStats) record(ctx context.Context, op string, err error, tolerated bool) bool {
	if err != nil && ctx.Err() != nil {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.requests[op]++
	if err == nil {
		return true
	}
	kind := errorKind(op, err)
	if tolerated {
		s.tolerated[kind]++
		return false
	}
	s.errors[kind]++
	if len(s.firstErrors) < maxErrorSamples {
		s.firstErrors = append(s.firstErrors, err.Error())
	}
	return false
}

// count adds one to an event counter (churn cycles, lag retries, ...).
func (s *soakStats) count(name string) {
	s.mu.Lock()
	s.events[name]++
	s.mu.Unlock()
}

func errorKind(op string, err error) string {
	if code := client.CodeOf(err); code != "" {
		return op + ":" + string(code)
	}
	return op + ":transport"
}

// snapshot copies the counters: requests, errors and tolerated failures
// in total, and every map.
type statsSnapshot struct {
	Requests    int64            `json:"requests"`
	Errors      int64            `json:"errors"`
	Tolerated   int64            `json:"tolerated"`
	ByOp        map[string]int64 `json:"by_op"`
	ErrorKinds  map[string]int64 `json:"error_kinds"`
	Tolerations map[string]int64 `json:"tolerated_kinds"`
	Events      map[string]int64 `json:"events"`
	FirstErrors []string         `json:"first_errors,omitempty"`
}

func (s *soakStats) snapshot() statsSnapshot {
	s.mu.Lock()
	defer s.mu.Unlock()
	cp := func(m map[string]int64) (map[string]int64, int64) {
		out := make(map[string]int64, len(m))
		var sum int64
		for k, v := range m {
			out[k] = v
			sum += v
		}
		return out, sum
	}
	snap := statsSnapshot{FirstErrors: append([]string(nil), s.firstErrors...)}
	snap.ByOp, snap.Requests = cp(s.requests)
	snap.ErrorKinds, snap.Errors = cp(s.errors)
	snap.Tolerations, snap.Tolerated = cp(s.tolerated)
	snap.Events, _ = cp(s.events)
	return snap
}

// sortedKeys returns m's keys in order, for stable output.
func sortedKeys(m map[string]int64) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// load is the soak's traffic: Ray-style flows on every node, catalog
// churn, kvsim process restarts and engine events.
type load struct {
	f     *fleet
	st    *soakStats
	hold  int           // bookings each flow goroutine keeps open
	lag   time.Duration // how long a lifecycle call on another node waits for replica sync
	seq   atomic.Uint64 // reservation and selection ids
	runID string

	// churnGen moves twice per churn cycle: before the churn worker is
	// deleted (it turns odd) and once every node has applied the cycle's
	// writes (even again). A booking on the churn worker that read an odd
	// generation, or one that has moved since, may lose its reservation
	// to the cycle; that 404 is tolerated.
	churnGen atomic.Uint64
	churnReg api.WorkerFields // the churn worker's registration (kvsim's)

	prefixes [][]uint32 // shared prompt prefixes, so selections find caches
}

const (
	promptPrefixes  = 32
	prefixBlocks    = 4
	maxSuffixBlocks = 8
	tokenVocabulary = 50_000
	callTimeout     = 10 * time.Second
)

func newLoad(f *fleet, st *soakStats, hold int, seed uint64) *load {
	rng := rand.New(rand.NewPCG(seed, 0x50a4))
	l := &load{f: f, st: st, hold: hold, lag: 3 * time.Second, runID: fmt.Sprintf("%x", rng.Uint32())}
	for range promptPrefixes {
		p := make([]uint32, prefixBlocks*soakBlockSize)
		for i := range p {
			p[i] = rng.Uint32N(tokenVocabulary)
		}
		l.prefixes = append(l.prefixes, p)
	}
	return l
}

// prompt is 1-4 blocks of a shared prefix and 1-8 blocks of fresh tokens.
func (l *load) prompt(rng *rand.Rand) []uint32 {
	pre := l.prefixes[rng.IntN(len(l.prefixes))][:(1+rng.IntN(prefixBlocks))*soakBlockSize]
	out := make([]uint32, len(pre), len(pre)+maxSuffixBlocks*soakBlockSize)
	copy(out, pre)
	for range (1 + rng.IntN(maxSuffixBlocks)) * soakBlockSize {
		out = append(out, rng.Uint32N(tokenVocabulary))
	}
	return out
}

func (l *load) newID(kind string) string {
	return fmt.Sprintf("soak-%s-%s-%d", l.runID, kind, l.seq.Add(1))
}

// booking is one open reservation of a flow goroutine.
type booking struct {
	id     string
	node   int // the node that booked it
	worker uint64
	gen    uint64 // churnGen before the selection
	// unknown: the booking call got no answer, so the node may not have
	// booked it (worker then unknown too); its free may answer 404.
	unknown bool
}

// churned reports whether a booking may have been dropped by the catalog
// churn: it is on the churn worker, and a churn cycle was under way when
// it started or has begun since.
func (l *load) churned(worker, gen uint64) bool {
	return worker >= churnWorkerID && (gen%2 == 1 || l.churnGen.Load() != gen)
}

// runFlows runs flows, one per tick, until ctx ends; then it frees the
// bookings it still holds under drain.
func (l *load) runFlows(ctx, drain context.Context, tick <-chan time.Time, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 0xf10e))
	var held []booking
	for {
		select {
		case <-ctx.Done():
			for _, b := range held {
				l.free(drain, rng, b)
			}
			return
		case <-tick:
		}
		held = l.flow(ctx, rng, held)
		l.st.count("flows")
	}
}

// flow is one simulated request on a random node: 40 % Ray's
// select-then-reserve by selection_id, 40 % select_and_reserve, 10 % a
// selection without booking, 10 % reads. The chosen worker serves the
// prompt (kvsim publishes its KV events), so later selections find it.
//
// A flow under way when the soak stops runs to its end: its calls, and the
// lifecycle of its booking (booked), are not cancelled by ctx (only bounded
// by callTimeout), so a booking in flight then is answered and freed like
// any other. (Cancelled, its answer was lost while the node booked it; or
// a free sent to a node replica sync had not reached yet, answered 404,
// was not tried again because the wait before the retry ended with ctx:
// either way the soak ended with a booking left on every node, counting
// against the server a free it never sent. Both happened.)
// A booking whose outcome stays unknown (no answer within callTimeout, a
// transport error) is held all the same: the free of its id is what makes
// sure it ends, and a 404 there means the node never booked it.
func (l *load) flow(ctx context.Context, rng *rand.Rand, held []booking) []booking {
	a := rng.IntN(len(l.f.nodes))
	cl := l.f.nodes[a].cl
	prompt := api.Prompt{ModelName: soakModel, TokenIDs: l.prompt(rng)}
	gen := l.churnGen.Load()
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), callTimeout)
	defer cancel()
	switch x := rng.IntN(100); {
	case x < 40:
		selID := l.newID("sel")
		sel, err := cl.Select(cctx, api.SelectRequest{Prompt: prompt, SelectionID: api.ID(selID)})
		if !l.st.record(ctx, "select", err, false) {
			return held
		}
		l.serve(cctx, sel, prompt.TokenIDs)
		resID := l.newID("res")
		_, err = cl.ReserveSelection(cctx, resID, selID)
		lost := l.lostToChurn(err, sel.WorkerID, gen)
		if err != nil && !lost {
			err = fmt.Errorf("%w (selected on %s: worker %d rank %d, churn generation %d, now %d)",
				err, l.f.nodes[a].id, sel.WorkerID, sel.DPRank, gen, l.churnGen.Load())
		}
		b := booking{id: resID, node: a, worker: sel.WorkerID, gen: gen}
		if !l.st.record(ctx, "reserve_selection", err, lost) {
			return l.heldIfUnknown(held, b, err)
		}
		return l.booked(context.WithoutCancel(ctx), rng, held, b)
	case x < 80:
		resID := l.newID("res")
		sel, err := cl.SelectAndReserve(cctx, api.SelectRequest{Prompt: prompt, ReservationID: api.ID(resID)})
		if !l.st.record(ctx, "select_and_reserve", err, false) {
			return l.heldIfUnknown(held, booking{id: resID, node: a, gen: gen, unknown: true}, err)
		}
		l.serve(cctx, sel, prompt.TokenIDs)
		return l.booked(context.WithoutCancel(ctx), rng, held, booking{id: resID, node: a, worker: sel.WorkerID, gen: gen})
	case x < 90:
		sel, err := cl.Select(cctx, api.SelectRequest{Prompt: prompt})
		if l.st.record(ctx, "select", err, false) {
			l.serve(cctx, sel, prompt.TokenIDs)
		}
	default:
		l.read(cctx, ctx, rng, cl, prompt)
	}
	return held
}

// heldIfUnknown adds b to held when err leaves its outcome unknown (no
// answer from the node: a timeout or a transport error), so that it is
// freed like a booking made; an answer with an error code booked nothing.
func (l *load) heldIfUnknown(held []booking, b booking, err error) []booking {
	if err == nil || client.CodeOf(err) != "" {
		return held
	}
	b.unknown = true
	l.st.count("bookings_with_unknown_outcome")
	return append(held, b)
}

// lostToChurn: a 404 for a booking on the churn worker after a churn
// cycle began is the race the soak provokes, not a fault.
func (l *load) lostToChurn(err error, worker, gen uint64) bool {
	return client.CodeOf(err) == api.CodeNotFound && l.churned(worker, gen)
}

// serve has the chosen worker's kvsim serve the prompt, unless its
// process is being restarted.
func (l *load) serve(ctx context.Context, sel *api.Selection, tokens []uint32) {
	s, kid, ok := l.f.simFor(sel.WorkerID)
	if !ok {
		l.st.record(ctx, "kvsim_prompt", fmt.Errorf("selection named worker %d, which no kvsim serves", sel.WorkerID), false)
		return
	}
	if !s.up.Load() {
		l.st.count("kvsim_prompt_skipped_restarting")
		return
	}
	_, err := s.ctl.Prompt(ctx, kid, int(sel.DPRank), tokens)
	l.st.record(ctx, "kvsim_prompt", err, !s.up.Load()) // it went down meanwhile
}

// booked reports the booking's life on random nodes, as a Ray driver's
// tasks would: sometimes an output block, then prefill_complete; the free
// comes once the goroutine holds more than l.hold bookings.
func (l *load) booked(ctx context.Context, rng *rand.Rand, held []booking, b booking) []booking {
	if rng.IntN(100) < 30 {
		l.lifecycle(ctx, "output_block", b, rng.IntN(len(l.f.nodes)), func(ctx context.Context, cl *client.Client) error {
			return cl.OutputBlock(ctx, b.id, nil)
		})
	}
	l.lifecycle(ctx, "prefill_complete", b, rng.IntN(len(l.f.nodes)), func(ctx context.Context, cl *client.Client) error {
		return cl.PrefillComplete(ctx, b.id)
	})
	held = append(held, b)
	for len(held) > l.hold {
		l.free(ctx, rng, held[0])
		held = held[1:]
	}
	return held
}

func (l *load) free(ctx context.Context, rng *rand.Rand, b booking) {
	l.lifecycle(ctx, "free", b, rng.IntN(len(l.f.nodes)), func(ctx context.Context, cl *client.Client) error {
		return cl.Free(ctx, b.id)
	})
}

// lifecycle reports one step of b's life to node i. Another node learns
// of the booking by replica sync, so a 404 there is retried for up to
// l.lag (counted as lag_retries) before it counts as an error.
func (l *load) lifecycle(ctx context.Context, op string, b booking, i int, call func(context.Context, *client.Client) error) {
	cl := l.f.nodes[i].cl
	deadline := time.Now().Add(l.lag)
	for {
		cctx, cancel := context.WithTimeout(ctx, callTimeout)
		err := call(cctx, cl)
		cancel()
		lost := l.lostToChurn(err, b.worker, b.gen) || b.unknown && client.CodeOf(err) == api.CodeNotFound
		if b.unknown && client.CodeOf(err) == api.CodeNotFound && time.Now().Before(deadline) {
			// Never booked, or booked and not yet mirrored here: wait
			// out replica sync's lag like any booking before deciding.
			l.st.count("lag_retries")
			if poll.Sleep(ctx, 10*time.Millisecond) != nil {
				return
			}
			continue
		}
		if client.CodeOf(err) == api.CodeNotFound && !lost && i != b.node && time.Now().Before(deadline) {
			l.st.count("lag_retries")
			if poll.Sleep(ctx, 10*time.Millisecond) != nil {
				return
			}
			continue
		}
		if err != nil && !lost {
			err = fmt.Errorf("%w (booked on %s, worker %d, churn generation %d, now %d)",
				err, l.f.nodes[b.node].id, b.worker, b.gen, l.churnGen.Load())
		}
		l.st.record(ctx, op, err, lost)
		return
	}
}

// read is one of the inspection calls an operator or driver makes.
func (l *load) read(cctx, ctx context.Context, rng *rand.Rand, cl *client.Client, prompt api.Prompt) {
	var err error
	op := ""
	switch rng.IntN(4) {
	case 0:
		op = "loads"
		_, err = cl.Loads(cctx, soakModel, "")
	case 1:
		op = "overlap_scores"
		_, err = cl.OverlapScores(cctx, prompt)
	case 2:
		op = "potential_loads"
		_, err = cl.PotentialLoads(cctx, prompt)
	default:
		op = "reservations"
		_, err = cl.Reservations(cctx, api.ReservationsQuery{ModelName: soakModel, Limit: 100})
	}
	l.st.record(ctx, op, err, false)
}

// registerChurn registers the churn worker under its first id and waits
// until every node follows it.
func (l *load) registerChurn(ctx context.Context) error {
	regs, err := l.f.churn.ctl.Workers(ctx)
	if err != nil {
		return err
	}
	if len(regs) != 1 {
		return fmt.Errorf("%s has %d workers, want 1", l.f.churn.name, len(regs))
	}
	l.churnReg = regs[0]
	if _, err := l.f.nodes[0].cl.UpsertWorker(ctx, l.churnReg); err != nil {
		return fmt.Errorf("register the churn worker: %w", err)
	}
	if err := l.f.waitFollowed(ctx, l.f.churn, churnWorkerID); err != nil {
		return err
	}
	l.f.churn.up.Store(true)
	return nil
}

// churnLoop runs one catalog churn cycle per tick, each write through
// another node (the followers forward to the leader): delete the churn
// worker, register it again (every other cycle under a new id, so that
// per-worker state keyed by id must be freed, not just reused), patch it.
// churnGen moves before the delete and again once every node has applied
// all three writes, so a booking that started in between may lose its
// reservation: a node that had not applied the re-add yet drops the
// replica-sync admission of a worker it does not know.
func (l *load) churnLoop(ctx context.Context, every time.Duration) {
	cur := uint64(churnWorkerID)
	n := len(l.f.nodes)
	eachTick(ctx, every, func(k int) {
		k++ // cycles count from 1
		del, add, patch := l.f.nodes[k%n], l.f.nodes[(k+1)%n], l.f.nodes[(k+2)%n]
		l.churnGen.Add(1)
		next := cur
		if k%2 == 1 {
			next = cur + 1
		}
		reg := l.churnReg
		reg.WorkerID = api.Ptr(next)
		cctx, cancel := context.WithTimeout(ctx, callTimeout)
		steps := []struct {
			op    string
			node  *soakNode
			write func() error
		}{
			{"worker_delete", del, func() error { _, err := del.cl.DeleteWorker(cctx, cur); return err }},
			{"worker_register", add, func() error { _, err := add.cl.UpsertWorker(cctx, reg); return err }},
			{"worker_patch", patch, func() error {
				_, err := patch.cl.PatchWorker(cctx, next, api.WorkerFields{TotalKVBlocks: api.Ptr(uint64(4096 + k))})
				return err
			}},
		}
		for _, step := range steps {
			if !l.st.record(ctx, step.op, step.write(), false) {
				break
			}
			if step.op == "worker_register" {
				cur = next
			}
			l.st.record(ctx, "catalog_applied_everywhere", l.waitApplied(cctx, step.node.cl.CatalogIndex()), false)
		}
		cancel()
		l.churnGen.Add(1)
		l.st.count("catalog_churn_cycles")
	})
}

// waitApplied waits until every node has applied catalog index idx.
func (l *load) waitApplied(ctx context.Context, idx uint64) error {
	return poll.Within(ctx, callTimeout, pollEvery, "every node applies the delete", func(ctx context.Context) error {
		for _, node := range l.f.nodes {
			st, err := node.cl.ClusterStatus(ctx)
			if err != nil {
				return err
			}
			if st.CatalogIndex < idx {
				return fmt.Errorf("%s is at catalog index %d, want %d", node.id, st.CatalogIndex, idx)
			}
		}
		return nil
	})
}

// restartLoop kills and restarts one kvsim process per tick, in turn.
func (l *load) restartLoop(ctx context.Context, every time.Duration) {
	eachTick(ctx, every, func(k int) {
		s := l.f.sims[k%len(l.f.sims)]
		err := l.f.restartSim(ctx, s)
		if l.st.record(ctx, "kvsim_process_restart", err, false) {
			l.st.count("kvsim_process_restarts")
		}
	})
}

// eachTick calls tick(0), tick(1), … once every interval until ctx ends.
func eachTick(ctx context.Context, every time.Duration, tick func(k int)) {
	t := time.NewTicker(every)
	defer t.Stop()
	for k := 0; ; k++ {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		tick(k)
	}
}

// engineLoop has a running worker's engine restart (its sequence back to
// 0, its cache silently lost) or clear its cache (AllBlocksCleared), in
// turn, one per tick.
func (l *load) engineLoop(ctx context.Context, every time.Duration, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 0xe9))
	eachTick(ctx, every, func(k int) {
		s := l.f.sims[rng.IntN(len(l.f.sims))]
		if !s.up.Load() {
			return
		}
		op, act := "kvsim_engine_restart", s.ctl.Restart
		if k%2 == 1 {
			op, act = "kvsim_reset", s.ctl.Reset
		}
		cctx, cancel := context.WithTimeout(ctx, callTimeout)
		err := act(cctx, s.firstID+uint64(rng.IntN(s.workers)), kvsim.AllRanks)
		cancel()
		l.st.record(ctx, op, err, !s.up.Load())
	})
}

// retireChurn deletes the churn worker once the load has stopped: its
// delete drops, on every node, the bookings that churn races left behind
// (an admission dropped by a node that had not applied the worker's
// re-add yet, whose free that node then refused).
func (l *load) retireChurn(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	cl := l.f.nodes[0].cl
	ws, err := cl.Workers(ctx, client.WorkersOptions{ModelName: soakModel, Linearizable: true})
	if err != nil {
		return err
	}
	for _, w := range ws {
		if w.WorkerID >= churnWorkerID {
			if _, err := cl.DeleteWorker(ctx, w.WorkerID); err != nil {
				return fmt.Errorf("delete the churn worker: %w", err)
			}
		}
	}
	return l.waitApplied(ctx, cl.CatalogIndex())
}

// waitIdle waits until no node holds any reservation of the soak's model.
func (l *load) waitIdle(ctx context.Context, timeout time.Duration) error {
	return poll.Within(ctx, timeout, pollEvery, "every node's load is back to zero", func(ctx context.Context) error {
		var busy []string
		for _, node := range l.f.nodes {
			pls, err := node.cl.Loads(ctx, soakModel, "")
			if err != nil {
				return err
			}
			for _, pl := range pls {
				for _, rl := range pl.Loads {
					if rl.ActiveRequests != 0 || rl.ActivePrefillTokens != 0 || rl.ActiveDecodeBlocks != 0 {
						busy = append(busy, fmt.Sprintf("%s worker %d rank %d: %+v", node.id, rl.WorkerID, rl.DPRank, rl))
					}
				}
			}
		}
		if len(busy) > 0 {
			return errors.New(fmt.Sprint(busy))
		}
		return nil
	})
}

// indexDivergence compares the nodes' indexes once the traffic has
// stopped: the blocks each node holds for each worker rank (from /dump),
// which must be the same everywhere since every node follows every
// worker. It returns one line per rank on which the nodes disagree.
func (l *load) indexDivergence(ctx context.Context) ([]string, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	type rankKey struct {
		worker uint64
		rank   uint32
	}
	perNode := make([]map[rankKey]int, len(l.f.nodes))
	keys := map[rankKey]bool{}
	for i, node := range l.f.nodes {
		dump, err := node.cl.Dump(ctx)
		if err != nil {
			return nil, fmt.Errorf("%s /dump: %w", node.id, err)
		}
		perNode[i] = map[rankKey]int{}
		for _, part := range dump {
			for _, ev := range part.Events {
				if st := ev.Event.Data.Stored; st != nil {
					k := rankKey{ev.WorkerID, ev.Event.DPRank}
					perNode[i][k] += len(st.Blocks)
					keys[k] = true
				}
			}
		}
	}
	var out []string
	for k := range keys {
		var counts []string
		same := true
		for i, node := range l.f.nodes {
			counts = append(counts, fmt.Sprintf("%s %d", node.id, perNode[i][k]))
			same = same && perNode[i][k] == perNode[0][k]
		}
		if !same {
			out = append(out, fmt.Sprintf("worker %d rank %d: %s blocks", k.worker, k.rank, strings.Join(counts, ", ")))
		}
	}
	sort.Strings(out)
	return out, nil
}
