package jepsen

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"sync/atomic"
	"time"

	"github.com/kvselect/kvselect/api"
	"github.com/kvselect/kvselect/client"
	"github.com/kvselect/kvselect/internal/poll"
)

// Leases (SPEC §3.7) in the workload. Lease clients register workers of
// LeaseModelName with lease_ttl_s = LeaseTTL, renew each for a while with
// POST /workers/{id}/keepalive on random nodes, then leave it to lapse
// and read it linearizably until it is gone; then the next id. Leased
// workers stay out of the porcupine model: a lapse is a delete no client
// asked for, at a time only the leader's clock decides. CheckLeases
// judges them instead, and CheckLeasesLapse that none outlives the run.

// LeaseModelName is the model of the lease clients' workers: incomplete
// like the catalog clients' (no KV event endpoint), never selected.
const LeaseModelName = "jepsen-lease"

// LeaseClientBase is added to a lease client's slot to make its Client.
const LeaseClientBase = 2 << 20

// leaseIDBase numbers the lease clients' workers, apart from kvsim's and
// the catalog clients'.
const leaseIDBase = 1 << 30

// Lease client pacing: how long a worker is renewed before it is left
// to lapse, and how often a lapsing worker is read.
const (
	leaseRenewMin  = 2 * time.Second
	leaseRenewMax  = 5 * time.Second
	leaseReadEvery = 500 * time.Millisecond
)

// RunLeaseClients runs n lease clients until ctx ends, recording every
// call in h.
func RunLeaseClients(ctx context.Context, ep Endpoints, base time.Time, n int, h *History) error {
	nodes, err := pinnedClients(ep)
	if err != nil {
		return err
	}
	var next atomic.Uint64
	next.Store(leaseIDBase)
	runClients(n, func(i int) {
		lc := leaseClient{slot: i, nodes: nodes, base: base, h: h, next: &next,
			r: clientRand(base, uint64(LeaseClientBase+i))}
		lc.run(ctx)
	})
	return nil
}

type leaseClient struct {
	slot  int
	nodes []*client.Client
	base  time.Time
	h     *History
	next  *atomic.Uint64
	r     *rand.Rand
}

func (c *leaseClient) run(ctx context.Context) {
	for ctx.Err() == nil {
		id := c.next.Add(1)
		if !c.register(ctx, id) {
			continue
		}
		c.renew(ctx, id, leaseRenewMin+rand.N(leaseRenewMax-leaseRenewMin))
		c.awaitLapse(ctx, id)
	}
}

// register registers id with a lease until a node acknowledges it (true)
// or its outcome is unknown (then the id is given up: false).
func (c *leaseClient) register(ctx context.Context, id uint64) bool {
	for ctx.Err() == nil {
		op := c.op(KindLeaseRegister, id)
		c.call(ctx, &op, func(ctx context.Context, cl *client.Client) error {
			_, err := cl.RegisterWorker(ctx, api.WorkerSpec{WorkerID: id, ModelName: LeaseModelName, TenantID: "default",
				Endpoint: fmt.Sprintf("http://lease/%d", id), BlockSize: CatalogBlockSize, LeaseTTLSeconds: uint32(LeaseTTL / time.Second)})
			return err
		})
		switch op.Result {
		case ResultOK:
			return true
		case ResultUnknown:
			return false
		}
		if poll.Sleep(ctx, 50*time.Millisecond) != nil {
			return false
		}
	}
	return false
}

// renew keeps id's lease for d, one keepalive every LeaseRenewEvery (a
// failed one is sent again at once to another node). It stops early when
// a keepalive finds the worker gone.
func (c *leaseClient) renew(ctx context.Context, id uint64, d time.Duration) {
	end := time.Now().Add(d)
	for time.Now().Before(end) && ctx.Err() == nil {
		op := c.op(KindKeepAlive, id)
		c.call(ctx, &op, func(ctx context.Context, cl *client.Client) error {
			_, err := cl.KeepAlive(ctx, id)
			return err
		})
		switch {
		case op.Result == ResultOK && op.NotFound:
			return
		case op.Result == ResultOK:
			if poll.Sleep(ctx, LeaseRenewEvery) != nil {
				return
			}
		default:
			if poll.Sleep(ctx, 20*time.Millisecond) != nil {
				return
			}
		}
	}
}

// awaitLapse reads id linearizably until it is gone.
func (c *leaseClient) awaitLapse(ctx context.Context, id uint64) {
	for ctx.Err() == nil {
		op := c.op(KindLeaseGet, id)
		c.call(ctx, &op, func(ctx context.Context, cl *client.Client) error {
			_, err := cl.Worker(ctx, id, true)
			return err
		})
		if op.Result == ResultOK && op.NotFound {
			return
		}
		if poll.Sleep(ctx, leaseReadEvery) != nil {
			return
		}
	}
}

func (c *leaseClient) op(kind string, id uint64) Op {
	return Op{Client: LeaseClientBase + c.slot, Node: c.r.IntN(len(c.nodes)), Kind: kind, WorkerID: id}
}

// call runs f on op's node, records op and returns f's error. A 404 is an
// ok answer (NotFound) for a keepalive or a read; an answer that proves
// nothing was done fails; anything else is unknown (a read: fail).
func (c *leaseClient) call(ctx context.Context, op *Op, f func(context.Context, *client.Client) error) (Op, error) {
	octx, cancel := context.WithTimeout(ctx, OpTimeout)
	op.Call = time.Since(c.base)
	err := f(octx, c.nodes[op.Node])
	op.Return = time.Since(c.base)
	cancel()
	var ce *client.Error
	switch {
	case err == nil:
		op.Result = ResultOK
	case errors.As(err, &ce) && ce.Code == api.CodeNotFound && op.Kind != KindLeaseRegister:
		op.Result, op.NotFound = ResultOK, true
	case errors.As(err, &ce) && (ce.Code.NothingWritten() || ce.Status/100 == 4 || op.Kind != KindLeaseRegister):
		op.Result = ResultFail
	case op.Kind != KindLeaseRegister:
		op.Result = ResultFail // a keepalive or read that got no answer renewed nothing for sure
	default:
		op.Result = ResultUnknown
	}
	if err != nil {
		op.Error = err.Error()
	}
	c.h.Add(*op)
	return *op, err
}

// LeaseCheck is what CheckLeases found.
type LeaseCheck struct {
	// RenewalsOK counts acknowledged registrations and keepalives;
	// Lapses the workers seen gone after they were left alone.
	RenewalsOK, Lapses int
	// Violations are workers seen gone before their lease could lapse.
	Violations []string
}

// CheckLeases checks the lease clients' ops: no worker may be seen gone
// (a keepalive or a linearizable read answering 404) while a renewal
// acknowledged before that call still covers it. A renewal called at t
// sets a deadline no earlier than t + LeaseTTL on the leader (a new
// leader gives every lease a full TTL from its election, later still),
// so a worker seen gone by a call that returned before then lost a lease
// it held. A keepalive a node acknowledged (after confirming it leads)
// is a promise; a lapse is fine only once every promise has run out.
func CheckLeases(ops []Op) LeaseCheck {
	var out LeaseCheck
	byID := map[uint64][]Op{}
	for _, op := range ops {
		switch op.Kind {
		case KindLeaseRegister, KindKeepAlive, KindLeaseGet:
			byID[op.WorkerID] = append(byID[op.WorkerID], op)
		}
	}
	for _, id := range slices.Sorted(maps.Keys(byID)) {
		idOps := byID[id]
		SortOps(idOps)
		lapsed := false
		for _, x := range idOps {
			switch {
			case x.Result != ResultOK:
				continue
			case !x.NotFound:
				out.RenewalsOK += boolInt(x.Kind != KindLeaseGet)
				continue
			}
			lapsed = true
			for _, r := range idOps {
				if r.Result != ResultOK || r.NotFound || r.Kind == KindLeaseGet || r.Return >= x.Call {
					continue
				}
				if x.Return < r.Call+LeaseTTL {
					out.Violations = append(out.Violations, fmt.Sprintf(
						"lease worker %d: %s on n%d found it gone at %v, but the %s acknowledged by n%d (called %v) kept it until at least %v",
						id, x.Kind, x.Node+1, x.Return, r.Kind, r.Node+1, r.Call, r.Call+LeaseTTL))
					break
				}
			}
		}
		out.Lapses += boolInt(lapsed)
	}
	return out
}

// CheckLeasesLapse waits, up to within, until no worker of LeaseModelName
// is left on any node: once the lease clients stop, every lease they held
// must lapse (LeaseTTL, plus LeaseLapseBound for the leader's expiry to
// reach every node).
func CheckLeasesLapse(ctx context.Context, ep Endpoints, within time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, within)
	defer cancel()
	clients, err := pinnedClients(ep)
	if err != nil {
		return err
	}
	return poll.Until(ctx, pollEvery, "every lease has lapsed on every node", func(ctx context.Context) error {
		for i, c := range clients {
			ws, err := c.Workers(ctx, client.WorkersOptions{ModelName: LeaseModelName})
			if err != nil {
				return fmt.Errorf("%s: %w", ep.URLs[i], err)
			}
			if len(ws) > 0 {
				return fmt.Errorf("%s still lists %d leased workers (worker %d first)", ep.URLs[i], len(ws), ws[0].WorkerID)
			}
		}
		return nil
	})
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}
