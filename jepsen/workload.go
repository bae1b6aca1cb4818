package jepsen

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kvselect/kvselect/api"
	"github.com/kvselect/kvselect/client"
	"github.com/kvselect/kvselect/internal/poll"
)

// Workload settings.
const (
	// CatalogModelName is the model of the workers the catalog clients
	// write. They carry no KV event endpoint, so they stay incomplete:
	// stored and replicated like any record, never selected, and no node
	// opens a listener for them.
	CatalogModelName = "jepsen-catalog"
	// CatalogBlockSize is the block_size the catalog clients register.
	CatalogBlockSize = 16
	// OpTimeout bounds one client call; past it the op is unknown.
	OpTimeout = 2 * time.Second
	// BookingRetryFor bounds how long prefill_complete and free are sent
	// again while the booking is not yet known to the node they reach
	// (replica sync lags) or the answer is lost.
	BookingRetryFor = 3 * time.Second
	// SelectionClientBase is added to a node's index to make the Client
	// of its selection ops, apart from the catalog clients' processes.
	SelectionClientBase = 1 << 20

	catalogPause   = 10 * time.Millisecond
	selectionPause = 20 * time.Millisecond
	bookingPause   = 50 * time.Millisecond
)

// RunCatalogClients runs n concurrent catalog clients until ctx ends,
// recording every op in h. Each op goes to a random node, through a
// client pinned to it (no retries, no leader following: the op is the
// node's answer; followers forward writes and linearizable reads to the
// leader themselves). The clients share len(ids) key slots, starting with
// ids: each op picks a slot and does register, patch (of the endpoint),
// delete or a linearizable get on its worker id. Every write carries an
// endpoint no other write uses, so a read names the write it sees.
//
// After an unknown write the client takes a new process number (the open
// op never returns) and the slot a fresh worker id, numbered after the
// largest of ids (keep that range free of real workers): a worker id's
// history then ends soon after its first unknown write, which keeps each
// porcupine partition small and leaves later acknowledged writes
// decisive for the lost-write check.
func RunCatalogClients(ctx context.Context, ep Endpoints, base time.Time, n int, ids []uint64, h *History) error {
	if len(ids) == 0 || n <= 0 {
		return errors.New("jepsen: catalog clients need worker ids and n > 0")
	}
	nodes, err := pinnedClients(ep)
	if err != nil {
		return err
	}
	slots := &keySlots{ids: slices.Clone(ids), next: slices.Max(ids) + 1}
	var seq atomic.Uint64
	runClients(n, func(i int) {
		cc := catalogClient{pid: i, n: n, nodes: nodes, base: base, slots: slots, seq: &seq, h: h,
			r: clientRand(base, uint64(i))}
		cc.run(ctx)
	})
	return nil
}

// keySlots are the worker ids the catalog clients share.
type keySlots struct {
	mu   sync.Mutex
	ids  []uint64
	next uint64
}

func (k *keySlots) pick(r *rand.Rand) (slot int, id uint64) {
	k.mu.Lock()
	defer k.mu.Unlock()
	slot = r.IntN(len(k.ids))
	return slot, k.ids[slot]
}

// retire gives the slot a fresh id, unless another client already did.
func (k *keySlots) retire(slot int, id uint64) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.ids[slot] == id {
		k.ids[slot] = k.next
		k.next++
	}
}

type catalogClient struct {
	pid, n int
	nodes  []*client.Client
	base   time.Time
	slots  *keySlots
	seq    *atomic.Uint64
	h      *History
	r      *rand.Rand
}

func (c *catalogClient) run(ctx context.Context) {
	for ctx.Err() == nil {
		slot, id := c.slots.pick(c.r)
		op := Op{Client: c.pid, Node: c.r.IntN(len(c.nodes)), Kind: c.pickKind(), WorkerID: id}
		if op.Kind == KindRegister || op.Kind == KindPatch {
			op.Value = fmt.Sprintf("http://w%d/%d", id, c.seq.Add(1))
		}
		c.do(ctx, &op)
		c.h.Add(op)
		if op.Result == ResultUnknown && op.IsWrite() {
			c.pid += c.n
			c.slots.retire(slot, id)
		}
		if poll.Sleep(ctx, catalogPause) != nil {
			return
		}
	}
}

// pickKind weighs reads and writes about evenly.
func (c *catalogClient) pickKind() string {
	switch x := c.r.IntN(100); {
	case x < 30:
		return KindRegister
	case x < 50:
		return KindPatch
	case x < 62:
		return KindDelete
	}
	return KindGet
}

func (c *catalogClient) do(ctx context.Context, op *Op) {
	ctx, cancel := context.WithTimeout(ctx, OpTimeout)
	defer cancel()
	node := c.nodes[op.Node]
	var out *api.WorkerWritten
	var err error
	op.Call = time.Since(c.base)
	switch op.Kind {
	case KindRegister:
		out, err = node.RegisterWorker(ctx, api.WorkerSpec{WorkerID: op.WorkerID, ModelName: CatalogModelName,
			TenantID: "default", Endpoint: op.Value, BlockSize: CatalogBlockSize})
	case KindPatch:
		out, err = node.PatchWorker(ctx, op.WorkerID, api.WorkerFields{Endpoint: &op.Value})
	case KindDelete:
		out, err = node.DeleteWorker(ctx, op.WorkerID)
	case KindGet:
		var w *api.Worker
		if w, err = node.Worker(ctx, op.WorkerID, true); err == nil {
			out = &api.WorkerWritten{Worker: *w}
		}
	}
	op.Return = time.Since(c.base)
	op.Result, op.NotFound = classifyCatalog(op.Kind, err)
	if err != nil {
		op.Error = err.Error()
	} else {
		op.Output, op.Body = out.Endpoint, encodeBody(out)
	}
}

// encodeBody is an answer as the history keeps it (Op.Body).
func encodeBody(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return "unencodable: " + err.Error()
	}
	return string(b)
}

// classifyCatalog judges a catalog call's error. A 404 on patch, delete or
// get is an ok answer (the worker was absent). An answer that proves
// nothing was written (not_leader, no_leader, shutting_down, any other
// 4xx) fails; so does any failed read, which changes nothing. Anything
// else (unknown_outcome, a timeout, a lost connection, a 5xx) leaves the
// write's fate unknown.
func classifyCatalog(kind string, err error) (result string, notFound bool) {
	if err == nil {
		return ResultOK, false
	}
	var ce *client.Error
	if errors.As(err, &ce) {
		if ce.Code == api.CodeNotFound && kind != KindRegister {
			return ResultOK, true
		}
		if ce.Code.NothingWritten() || ce.Status/100 == 4 {
			return ResultFail, false
		}
	}
	if kind == KindGet {
		return ResultFail, false
	}
	return ResultUnknown, false
}

// SelectionPrompts is the fixed prompt set of the selection clients and
// of CheckIndexConverged: four prompts of 128 tokens in the default
// partition that share their first 64 tokens.
func SelectionPrompts() []api.Prompt {
	prompts := make([]api.Prompt, 4)
	for k := range prompts {
		toks := make(api.TokenIDs, 128)
		for j := range toks {
			toks[j] = uint32(1000 + j)
			if j >= 64 {
				toks[j] = uint32(10000*(k+1) + j)
			}
		}
		prompts[k] = api.Prompt{ModelName: "default", TenantID: "default", TokenIDs: toks}
	}
	return prompts
}

// RunSelectionClients runs one selection client per node until ctx ends:
// select_and_reserve on its own node, then prefill_complete and free each
// on a random node (the booking reaches the others by replica sync, so a
// 404 is retried for up to BookingRetryFor). Every call is recorded in h:
// a select_and_reserve is ok (a worker, or load shedding's busy answer)
// or fail (availability); a booking call that may have been lost is
// unknown. A booking whose free was never confirmed stays in open, for
// SweepBookings once the faults are healed.
func RunSelectionClients(ctx context.Context, ep Endpoints, base time.Time, h *History, open *OpenBookings) error {
	nodes, err := pinnedClients(ep)
	if err != nil {
		return err
	}
	prompts := SelectionPrompts()
	runClients(len(nodes), func(i int) {
		sc := selectionClient{node: i, nodes: nodes, base: base, prompts: prompts, h: h, open: open,
			r: clientRand(base, uint64(SelectionClientBase+i))}
		sc.run(ctx)
	})
	return nil
}

type selectionClient struct {
	node    int
	nodes   []*client.Client
	base    time.Time
	prompts []api.Prompt
	h       *History
	open    *OpenBookings
	r       *rand.Rand
}

// IsBusy reports whether err is load shedding's answer, exactly: 503 with
// seed 001's body ({"message": api.BusyMessage, "type": api.BusyType,
// "code": 503}). Any other 503 is a failure.
func IsBusy(err error) bool {
	var ce *client.Error
	return errors.As(err, &ce) && ce.Status == 503 && ce.Code == api.CodeOverloaded && ce.Message == api.BusyMessage
}

func (c *selectionClient) run(ctx context.Context) {
	for seq := 0; ctx.Err() == nil; seq++ {
		rid := fmt.Sprintf("jepsen-%d-%d", c.node, seq)
		// Bookings are finished even after ctx ends, so that the loads
		// can return to zero.
		fin := context.WithoutCancel(ctx)
		switch c.selectAndReserve(ctx, rid, c.prompts[seq%len(c.prompts)]) {
		case ResultOK:
			c.settle(fin, KindPrefillComplete, rid, -1)
			if c.settle(fin, KindFree, rid, -1) != ResultOK {
				c.open.Add(rid, -1)
			}
		case ResultUnknown:
			// The booking may exist, on this node only: free it there.
			// A 404 does not prove there is none: a request the client
			// gave up on (a timeout, the stop) may still be running on
			// the node and book after the free; the sweep after the heal
			// frees it again, once nothing can be in flight.
			c.settle(fin, KindFree, rid, c.node)
			c.open.Add(rid, c.node)
		}
		if poll.Sleep(ctx, selectionPause) != nil {
			return
		}
	}
}

// selectAndReserve records one booking attempt on the client's node and
// returns its result: ok when a worker was booked, unknown when no answer
// came (the booking may exist), and otherwise fail, or busy (an ok op
// that booked nothing).
func (c *selectionClient) selectAndReserve(ctx context.Context, rid string, p api.Prompt) string {
	op := Op{Client: SelectionClientBase + c.node, Node: c.node, Kind: KindSelectAndReserve, ReservationID: rid}
	booked := bookOnce(ctx, c.nodes[c.node], c.base, &op, p)
	c.h.Add(op)
	switch {
	case op.Busy:
		return resultBusy
	case booked == bookingMaybe:
		return ResultUnknown
	}
	return op.Result
}

// resultBusy is what selectAndReserve returns for a busy answer.
const resultBusy = "busy"

// What a select_and_reserve left behind.
const (
	bookingNone  = iota // an answer proved nothing was booked (error, busy)
	bookingMade         // a worker was booked
	bookingMaybe        // no answer: a booking may exist on the node
)

// bookOnce sends one select_and_reserve of prompt p for op (its Client,
// Node, Kind and ReservationID set) to node, fills in the rest of op and
// says whether a booking exists.
func bookOnce(ctx context.Context, node *client.Client, base time.Time, op *Op, p api.Prompt) int {
	octx, cancel := context.WithTimeout(ctx, OpTimeout)
	op.Call = time.Since(base)
	sel, err := node.SelectAndReserve(octx, api.SelectRequest{Prompt: p, ReservationID: api.ID(op.ReservationID)})
	op.Return = time.Since(base)
	cancel()
	var ce *client.Error
	answered := errors.As(err, &ce)
	switch {
	case err == nil:
		op.Result, op.Selected, op.Rank = ResultOK, sel.WorkerID, sel.DPRank
		return bookingMade
	case IsBusy(err):
		op.Result, op.Busy, op.Error = ResultOK, true, err.Error()
	case answered || ctx.Err() == nil:
		// An error answer, or none in time: the node is unavailable.
		op.Result, op.Error = ResultFail, err.Error()
	default:
		// Cut short by the end of the run: says nothing about
		// availability.
		op.Result, op.Error = ResultUnknown, err.Error()
	}
	if answered {
		return bookingNone
	}
	return bookingMaybe
}

// settle sends a booking call to node (random nodes when node < 0) until
// one accepts it or BookingRetryFor passes, records it as one op and
// returns its result. Only an acceptance settles a booking the client
// was told it has (node < 0): a 404 from one node says nothing of the
// others (replica sync may not have brought it there, or a restart lost
// it there while its origin keeps it). A free of a booking that may exist
// on node only (its selection's answer was lost) is settled by a 404
// from that node too. What is not settled is the sweep's (OpenBookings).
func (c *selectionClient) settle(ctx context.Context, kind, rid string, node int) string {
	op := Op{Client: SelectionClientBase + c.node, Kind: kind, ReservationID: rid, Result: ResultFail}
	op.Call = time.Since(c.base)
	deadline := time.Now().Add(BookingRetryFor)
	for {
		op.Node = node
		if node < 0 {
			op.Node = c.r.IntN(len(c.nodes))
		}
		octx, cancel := context.WithTimeout(ctx, OpTimeout)
		var err error
		if kind == KindFree {
			err = c.nodes[op.Node].Free(octx, rid)
		} else {
			err = c.nodes[op.Node].PrefillComplete(octx, rid)
		}
		cancel()
		var ce *client.Error
		switch {
		case err == nil:
			op.Result, op.NotFound, op.Error = ResultOK, false, ""
		case errors.As(err, &ce) && ce.Code == api.CodeNotFound:
			op.NotFound, op.Error, op.Result = true, err.Error(), ResultFail
			if node >= 0 && kind == KindFree {
				op.Result = ResultOK
			}
		case errors.As(err, &ce):
			op.NotFound, op.Error, op.Result = false, err.Error(), ResultFail
		default:
			op.NotFound, op.Error, op.Result = false, err.Error(), ResultUnknown
		}
		if op.Result == ResultOK || time.Now().After(deadline) || poll.Sleep(ctx, bookingPause) != nil {
			break
		}
	}
	op.Return = time.Since(c.base)
	c.h.Add(op)
	return op.Result
}

// clientRand is the random source of the client whose ops carry Client
// stream: seeded by the run's base time, so that runs differ, and by
// stream, so that the clients of one run differ from each other.
func clientRand(base time.Time, stream uint64) *rand.Rand {
	return rand.New(rand.NewPCG(uint64(base.UnixNano()), stream))
}

// runClients runs run(0) … run(n-1) at once and waits for all of them.
func runClients(n int, run func(i int)) {
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { run(i) })
	}
	wg.Wait()
}
