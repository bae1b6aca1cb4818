package kvsim

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/kvselect/kvselect/api"
	"github.com/kvselect/kvselect/client"
	"github.com/kvselect/kvselect/internal/poll"
)

// Lifecycle says which node hears a booking's prefill_complete and free.
type Lifecycle int

const (
	// LifecycleSameNode reports to the node that booked the request.
	LifecycleSameNode Lifecycle = iota
	// LifecycleOtherNode reports to the next node (round the list): the
	// booking is known there only through replica sync.
	LifecycleOtherNode
)

// String returns the name ParseLifecycle accepts.
func (l Lifecycle) String() string {
	if l == LifecycleOtherNode {
		return "other"
	}
	return "same"
}

// ParseLifecycle parses "same" or "other".
func ParseLifecycle(s string) (Lifecycle, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "same":
		return LifecycleSameNode, nil
	case "other":
		return LifecycleOtherNode, nil
	}
	return 0, fmt.Errorf("%w: lifecycle %q (want same or other)", ErrInvalidConfig, s)
}

// NodeObserver tells a KvselectRouter what each kvselect node has taken
// in, so that Settle can wait for it. HTTPObserver asks the nodes' API; a
// harness that runs the nodes in process can look at them directly.
type NodeObserver interface {
	// Applied returns the sequence number of the last KV event batch
	// node has applied to its index, per worker rank (ranks without one
	// are absent).
	Applied(ctx context.Context, node int) (map[RankID]uint64, error)
	// Loads returns node's bookings per rank of the partition, its own
	// and mirrored ones alike: how many, and the prefill tokens booked by
	// those whose prefill is not complete, as booked. Not the decayed
	// figure /loads shows: a node fades prefill that is not reported
	// complete in time, on its own clock, and a settle must not take a
	// faded booking for a prefill_complete that arrived.
	Loads(ctx context.Context, node int) (map[RankID]RankLoad, error)
}

// RankLoad is the part of a rank's bookings that Settle compares.
type RankLoad struct {
	Requests      int
	PrefillTokens int64
}

// KvselectConfig configures a KvselectRouter.
type KvselectConfig struct {
	// Nodes has a client per kvselect node, each with that node as its
	// home (client.Config.Addrs[0]). Requests are booked on them in turn,
	// as Ray's replicas would spread them.
	Nodes []*client.Client
	// Model and Tenant name the partition (the Sim's).
	Model, Tenant string
	// ReplicaSync says whether the nodes share bookings: Settle then
	// expects every booking on every node, else only on the node that
	// made it.
	ReplicaSync bool
	// Lifecycle says where prefill_complete and free go; the other node
	// needs ReplicaSync.
	Lifecycle Lifecycle
	// Observer sees what the nodes applied (default: HTTPObserver).
	Observer NodeObserver
	// SettleTimeout bounds one Settle (default 30 s): past it the run
	// fails, naming what never arrived.
	SettleTimeout time.Duration
}

// KvselectRouter routes a timed replay through kvselect nodes the way Ray
// does (seed 000's flow): POST /select_and_reserve on one node per request,
// POST /reservations/{id}/prefill_complete at the first token and DELETE
// /reservations/{id} at the end. The prompts go as token ids, so the nodes
// hash them themselves, and the fleet's engines publish real KV events
// to them (NewSimFleet).
//
// In virtual time its Settle waits, before every call, until each node
// has applied every KV event the engines published and holds exactly the
// bookings it should (all of them with replica sync, its own without), so
// each selection sees the state that virtual time says it should,
// whatever the wall-clock delays.
type KvselectRouter struct {
	cfg      KvselectConfig
	fleet    *Fleet
	sim      *Sim
	next     int              // node of the next booking
	bookings map[int]*booking // by request index (probes: negative)
	// settledSeq is each rank's last published sequence number that every
	// node is known to have applied; loadsDirty says a booking changed
	// since the last settle.
	settledSeq map[RankID]uint64
	loadsDirty bool
	probes     int
}

type booking struct {
	id       string
	node     int
	rank     RankID
	prefill  int64
	complete bool
}

// NewKvselectRouter returns a router over the kvselect nodes for fleet,
// which must be a NewSimFleet of sim registered with those nodes.
func NewKvselectRouter(fleet *Fleet, sim *Sim, cfg KvselectConfig) (*KvselectRouter, error) {
	switch {
	case len(cfg.Nodes) == 0:
		return nil, fmt.Errorf("%w: kvselect router needs at least one node", ErrInvalidConfig)
	case cfg.Lifecycle == LifecycleOtherNode && !cfg.ReplicaSync && len(cfg.Nodes) > 1:
		return nil, fmt.Errorf("%w: reporting a booking's lifecycle to another node needs replica sync", ErrInvalidConfig)
	}
	if cfg.Model == "" {
		cfg.Model = sim.cfg.Model
	}
	if cfg.Tenant == "" {
		cfg.Tenant = sim.cfg.Tenant
	}
	if cfg.Observer == nil {
		cfg.Observer = HTTPObserver{Nodes: cfg.Nodes, Model: cfg.Model, Tenant: cfg.Tenant}
	}
	if cfg.SettleTimeout <= 0 {
		cfg.SettleTimeout = 30 * time.Second
	}
	return &KvselectRouter{cfg: cfg, fleet: fleet, sim: sim, bookings: map[int]*booking{}, settledSeq: map[RankID]uint64{}}, nil
}

// Route books the request on the next node with /select_and_reserve.
func (r *KvselectRouter) Route(ctx context.Context, req *TimedRequest) (int, error) {
	node := r.next
	r.next = (r.next + 1) % len(r.cfg.Nodes)
	id := fmt.Sprintf("trace-%d", req.Index)
	sel, err := r.cfg.Nodes[node].SelectAndReserve(ctx, api.SelectRequest{
		Prompt:        api.Prompt{ModelName: r.cfg.Model, TenantID: r.cfg.Tenant, TokenIDs: req.Tokens},
		ReservationID: api.ID(id),
	})
	if err != nil {
		if client.CodeOf(err) == api.CodeOverloaded {
			return 0, fmt.Errorf("%w: %w", ErrRejected, err)
		}
		return 0, err
	}
	rank := RankID{WorkerID: sel.WorkerID, DPRank: sel.DPRank}
	i, ok := r.fleet.Index(rank)
	if !ok {
		return 0, fmt.Errorf("%w: worker %d dp_rank %d", errBadSelection, sel.WorkerID, sel.DPRank)
	}
	r.bookings[req.Index] = &booking{id: id, node: node, rank: rank, prefill: sel.EffectivePrefillTokens}
	r.loadsDirty = true
	return i, nil
}

// FirstToken reports prefill_complete.
func (r *KvselectRouter) FirstToken(ctx context.Context, req *TimedRequest) error {
	b := r.bookings[req.Index]
	if b == nil {
		return nil
	}
	b.complete = true
	r.loadsDirty = true
	return r.cfg.Nodes[r.lifecycleNode(b)].PrefillComplete(ctx, b.id)
}

// Finished frees the booking.
func (r *KvselectRouter) Finished(ctx context.Context, req *TimedRequest) error {
	b := r.bookings[req.Index]
	if b == nil {
		return nil
	}
	delete(r.bookings, req.Index)
	r.loadsDirty = true
	return r.cfg.Nodes[r.lifecycleNode(b)].Free(ctx, b.id)
}

func (r *KvselectRouter) lifecycleNode(b *booking) int {
	if r.cfg.Lifecycle == LifecycleOtherNode {
		return (b.node + 1) % len(r.cfg.Nodes)
	}
	return b.node
}

// Settle waits until every node has applied every KV event published so
// far and holds the bookings it should. It polls the observer with a
// short backoff; a condition that does not hold within SettleTimeout is
// an error that names it.
func (r *KvselectRouter) Settle(ctx context.Context) error {
	return r.settleWithin(ctx, r.cfg.SettleTimeout)
}

func (r *KvselectRouter) settleWithin(ctx context.Context, timeout time.Duration) error {
	want := r.publishedSeqs()
	if !r.loadsDirty && len(want) == 0 {
		return nil
	}
	deadline := time.Now().Add(timeout)
	backoff := 20 * time.Microsecond
	for {
		missing, err := r.unsettled(ctx, want)
		if err != nil {
			return err
		}
		if missing == "" {
			for rk, seq := range want {
				r.settledSeq[rk] = seq
			}
			r.loadsDirty = false
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("kvselect nodes did not settle within %s: %s", timeout, missing)
		}
		if err := poll.Sleep(ctx, backoff); err != nil {
			return err
		}
		backoff = min(2*backoff, 2*time.Millisecond)
	}
}

// publishedSeqs returns the ranks that published since they last settled,
// with their last sequence number.
func (r *KvselectRouter) publishedSeqs() map[RankID]uint64 {
	var out map[RankID]uint64
	for i := range r.fleet.Len() {
		rk := r.fleet.Rank(i)
		w := r.sim.Worker(rk.WorkerID)
		if w == nil {
			continue
		}
		seq, ok := w.LastSeq(int(rk.DPRank))
		if !ok {
			continue
		}
		if done, ok := r.settledSeq[rk]; ok && done == seq {
			continue
		}
		if out == nil {
			out = map[RankID]uint64{}
		}
		out[rk] = seq
	}
	return out
}

// unsettled returns what some node still lacks ("" when nothing).
func (r *KvselectRouter) unsettled(ctx context.Context, want map[RankID]uint64) (string, error) {
	for node := range r.cfg.Nodes {
		if len(want) > 0 {
			applied, err := r.cfg.Observer.Applied(ctx, node)
			if err != nil {
				return "", fmt.Errorf("node %d: applied KV events: %w", node, err)
			}
			for rk, seq := range want {
				if got, ok := applied[rk]; !ok || got < seq {
					return fmt.Sprintf("node %d has applied worker %d rank %d's KV events up to %d (ok %v) of %d",
						node, rk.WorkerID, rk.DPRank, got, ok, seq), nil
				}
			}
		}
		if r.loadsDirty {
			loads, err := r.cfg.Observer.Loads(ctx, node)
			if err != nil {
				return "", fmt.Errorf("node %d: loads: %w", node, err)
			}
			expected := r.expectedLoads(node)
			for i := range r.fleet.Len() {
				rk := r.fleet.Rank(i)
				if got, want := loads[rk], expected[rk]; got != want {
					return fmt.Sprintf("node %d holds %+v on worker %d rank %d, want %+v", node, got, rk.WorkerID, rk.DPRank, want), nil
				}
			}
		}
	}
	return "", nil
}

// expectedLoads is what node should hold: every booking with replica
// sync, its own without.
func (r *KvselectRouter) expectedLoads(node int) map[RankID]RankLoad {
	out := map[RankID]RankLoad{}
	for _, b := range r.bookings {
		if !r.cfg.ReplicaSync && b.node != node {
			continue
		}
		l := out[b.rank]
		l.Requests++
		if !b.complete {
			l.PrefillTokens += b.prefill
		}
		out[b.rank] = l
	}
	return out
}

// Prepare readies the nodes for a deterministic replay, waiting on
// conditions only: every node lists every fleet rank with an active KV
// event listener; every node has applied a first KV event of every rank
// (an AllBlocksCleared, harmless on the empty caches of a new Sim), so
// later sequence numbers compare; and, with replica sync, a probe booking
// made on each node reached every other node. ZMQ subscriptions land
// asynchronously and a message sent before one lands is lost, so each
// probe is repeated until one gets through (at most attempts times).
func (r *KvselectRouter) Prepare(ctx context.Context) error {
	const attempts = 20
	if err := r.waitListeners(ctx); err != nil {
		return err
	}
	for range attempts {
		for i := range r.fleet.Len() {
			rk := r.fleet.Rank(i)
			if err := r.sim.Worker(rk.WorkerID).Reset(int(rk.DPRank)); err != nil {
				return err
			}
		}
		if err := r.settleWithin(ctx, time.Second); err == nil {
			break
		} else if ctx.Err() != nil {
			return ctx.Err()
		}
	}
	if err := r.settleWithin(ctx, time.Second); err != nil {
		return fmt.Errorf("kvsim: KV events do not reach every node: %w", err)
	}
	if !r.cfg.ReplicaSync || len(r.cfg.Nodes) < 2 {
		return nil
	}
	for range attempts {
		ok, err := r.probeSync(ctx)
		if err != nil || ok {
			return err
		}
	}
	return errors.New("kvsim: replica sync does not carry bookings between every pair of nodes")
}

// waitListeners polls each node's /workers until every fleet rank has an
// active listener there.
func (r *KvselectRouter) waitListeners(ctx context.Context) error {
	err := poll.Within(ctx, r.cfg.SettleTimeout, 5*time.Millisecond, "every node listens to every rank", func(ctx context.Context) error {
		for node, c := range r.cfg.Nodes {
			ws, err := c.Workers(ctx, client.WorkersOptions{ModelName: r.cfg.Model, TenantID: r.cfg.Tenant})
			if err != nil {
				if ctx.Err() != nil {
					return err // the deadline cut the call short; poll reports what was missing before
				}
				return poll.Fatal(fmt.Errorf("node %d: %w", node, err))
			}
			active := map[RankID]bool{}
			for _, w := range ws {
				for rank, l := range w.Listeners {
					active[RankID{WorkerID: w.WorkerID, DPRank: rank}] = l.State == api.ListenerActive
				}
			}
			for i := range r.fleet.Len() {
				if rk := r.fleet.Rank(i); !active[rk] {
					return fmt.Errorf("node %d has no active listener for worker %d rank %d", node, rk.WorkerID, rk.DPRank)
				}
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("kvsim: %w", err)
	}
	return nil
}

// probeSync books a one-block probe on every node and reports whether
// every other node mirrored it; the probes are freed either way.
func (r *KvselectRouter) probeSync(ctx context.Context) (bool, error) {
	rank := r.fleet.Rank(0)
	tokens := make([]uint32, r.fleet.cfg.BlockSize)
	prefill := int64(len(tokens))
	var keys []int
	for node, c := range r.cfg.Nodes {
		r.probes++
		id := fmt.Sprintf("probe-%d", r.probes)
		_, err := c.Reserve(ctx, api.ReserveRequest{ReservationID: api.ID(id), WorkerID: &rank.WorkerID, DPRank: rank.DPRank,
			Prompt: api.Prompt{ModelName: r.cfg.Model, TenantID: r.cfg.Tenant, TokenIDs: tokens}, EffectivePrefillTokens: &prefill})
		if err != nil {
			return false, fmt.Errorf("probe booking on node %d: %w", node, err)
		}
		r.bookings[-r.probes] = &booking{id: id, node: node, rank: rank, prefill: prefill}
		keys = append(keys, -r.probes)
	}
	r.loadsDirty = true
	ok := r.settleWithin(ctx, time.Second) == nil
	if ctx.Err() != nil {
		return false, ctx.Err()
	}
	slices.Sort(keys)
	for _, k := range keys {
		b := r.bookings[k]
		delete(r.bookings, k)
		if err := r.cfg.Nodes[b.node].Free(ctx, b.id); err != nil {
			return false, fmt.Errorf("free probe on node %d: %w", b.node, err)
		}
	}
	r.loadsDirty = true
	// A node that missed a probe's admission gets its free (a tombstone),
	// so every node ends at zero either way.
	if err := r.settleWithin(ctx, r.cfg.SettleTimeout); err != nil {
		return false, fmt.Errorf("after the replica-sync probe: %w", err)
	}
	return ok, nil
}

// HTTPObserver observes kvselect nodes through their API: GET /workers
// for each listener's last_seq and GET /reservations. A listener counts a
// message as it starts applying it, so over HTTP a settle can, rarely,
// pass a moment before the index holds the batch; an observer inside the
// nodes' process (the indexer's watermark) is exact.
type HTTPObserver struct {
	Nodes         []*client.Client
	Model, Tenant string
}

// Applied reads each rank's listener last_seq.
func (o HTTPObserver) Applied(ctx context.Context, node int) (map[RankID]uint64, error) {
	ws, err := o.Nodes[node].Workers(ctx, client.WorkersOptions{ModelName: o.Model, TenantID: o.Tenant})
	if err != nil {
		return nil, err
	}
	out := map[RankID]uint64{}
	for _, w := range ws {
		for rank, l := range w.Listeners {
			if l.Messages > 0 {
				out[RankID{WorkerID: w.WorkerID, DPRank: rank}] = l.LastSeq
			}
		}
	}
	return out, nil
}

// Loads pages through GET /reservations.
func (o HTTPObserver) Loads(ctx context.Context, node int) (map[RankID]RankLoad, error) {
	out := map[RankID]RankLoad{}
	q := api.ReservationsQuery{ModelName: o.Model, TenantID: o.Tenant, Limit: api.MaxReservationsLimit}
	for {
		page, err := o.Nodes[node].Reservations(ctx, q)
		if err != nil {
			return nil, err
		}
		for _, r := range page.Reservations {
			rk := RankID{WorkerID: r.WorkerID, DPRank: r.DPRank}
			l := out[rk]
			l.Requests++
			if !r.PrefillComplete {
				l.PrefillTokens += r.PrefillTokens
			}
			out[rk] = l
		}
		if page.NextCursor == "" {
			return out, nil
		}
		q.Cursor = page.NextCursor
	}
}
