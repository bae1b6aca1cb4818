package jepsen

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"time"

	"github.com/kvselect/kvselect/api"
	"github.com/kvselect/kvselect/client"
	"github.com/kvselect/kvselect/internal/poll"
)

// Busy thresholds (SPEC §8) in the workload. One threshold client cycles
// the thresholds of ThresholdModel (the kvsim workers' model) through
// random nodes: a tight one (TightDecodeThreshold, over which a rank
// holding one selection prompt is busy), then a loose one or none. Each
// threshold write carries a prefill threshold no rank reaches, unique per
// write (thresholdTag), so a read names the write it sees; the writes and
// linearizable reads go to the catalog model with the worker ops.
//
// While a tight threshold is in force and applied on the node it was
// written through, the client books holds there (select_and_reserve)
// until every kvsim rank is busy, then probes: one more selection there
// must answer busy (a judged probe that books a worker is load shedding
// broken). The selection clients meanwhile meet busy answers, which are
// expected outcomes: their Result is ok. BusyWindows says when a busy
// answer can be explained by a tight threshold; UnexplainedBusy counts
// those that cannot. The holds are freed before the threshold is loosened.

// ThresholdClient is the first Client of the threshold client's ops; it
// takes the next number after an unknown write, as catalog clients do.
const ThresholdClient = 4 << 20

// Threshold client pacing: how long a tight threshold stays with its
// holds, and how long a loose one.
const (
	thresholdHoldFor   = time.Second
	thresholdTightFor  = time.Second
	thresholdLooseFor  = 2 * time.Second
	thresholdHoldRetry = 20 * time.Millisecond
)

// thresholdTag is the prefill threshold of write seq: far above any
// rank's prefill load, so it never sheds, and unique.
func thresholdTag(seq int) uint64 { return 1_000_000 + uint64(seq) }

// RunThresholdClient runs the threshold client until ctx ends. ranks is
// the number of kvsim ranks in ThresholdModel (every one must be held for
// a probe to be judged); holds whose free is not confirmed go to open.
func RunThresholdClient(ctx context.Context, ep Endpoints, base time.Time, ranks int, h *History, open *OpenBookings) error {
	nodes, err := pinnedClients(ep)
	if err != nil {
		return err
	}
	tc := thresholdClient{pid: ThresholdClient, nodes: nodes, base: base, ranks: ranks, h: h, open: open,
		r: clientRand(base, ThresholdClient)}
	tc.run(ctx)
	return nil
}

type thresholdClient struct {
	pid   int
	nodes []*client.Client
	base  time.Time
	ranks int
	h     *History
	open  *OpenBookings
	r     *rand.Rand
}

func (c *thresholdClient) run(ctx context.Context) {
	for seq := 1; ctx.Err() == nil; seq++ {
		tight := c.write(ctx, KindThresholdSet, TightDecodeThreshold, seq)
		if tight.Result == ResultOK && !tight.NotApplied {
			c.holdAndProbe(ctx, tight.Node, seq)
		} else if poll.Sleep(ctx, thresholdTightFor) != nil {
			return
		}
		if seq%2 == 0 {
			c.write(ctx, KindThresholdClear, 0, seq)
		} else {
			c.write(ctx, KindThresholdSet, LooseDecodeThreshold, seq)
		}
		c.read(ctx)
		if poll.Sleep(ctx, thresholdLooseFor) != nil {
			return
		}
	}
}

// write sets (decode, thresholdTag(seq)) or clears the thresholds
// through a random node and records the op.
func (c *thresholdClient) write(ctx context.Context, kind string, decode float64, seq int) Op {
	op := Op{Client: c.pid, Node: c.r.IntN(len(c.nodes)), Kind: kind}
	var info client.ResponseInfo
	octx, cancel := context.WithTimeout(client.WithResponseInfo(ctx, &info), OpTimeout)
	defer cancel()
	var out *api.BusyThreshold
	var err error
	op.Call = time.Since(c.base)
	if kind == KindThresholdSet {
		tag := thresholdTag(seq)
		op.Value = ThresholdValue(&decode, &tag)
		prefill := int64(tag)
		out, err = c.nodes[op.Node].SetBusyThreshold(octx, api.BusyThresholdRequest{Model: ThresholdModel,
			ActiveDecodeBlocksThreshold: &decode, ActivePrefillTokensThreshold: &prefill})
	} else {
		out, err = c.nodes[op.Node].ClearBusyThreshold(octx, ThresholdModel)
	}
	op.Return = time.Since(c.base)
	op.Result, _ = classifyCatalog(kind, err)
	if err != nil {
		op.Error = err.Error()
	} else {
		op.Output, op.Body, op.NotApplied = answeredThreshold(out), encodeBody(out), info.NotApplied
	}
	c.h.Add(op)
	if op.Result == ResultUnknown {
		c.pid += 1 << 10 // the unknown op never returns
	}
	return op
}

// answeredThreshold is ThresholdValue of a write's answer; an answer
// about another model is marked so that it matches no state.
func answeredThreshold(t *api.BusyThreshold) string {
	v := ThresholdValue(t.ActiveDecodeBlocksThreshold, t.ActivePrefillTokensThreshold)
	if t.Model != ThresholdModel {
		return fmt.Sprintf("model %q: %s", t.Model, v)
	}
	return v
}

// read lists the thresholds linearizably through a random node.
func (c *thresholdClient) read(ctx context.Context) {
	op := Op{Client: c.pid, Node: c.r.IntN(len(c.nodes)), Kind: KindThresholdGet}
	octx, cancel := context.WithTimeout(ctx, OpTimeout)
	defer cancel()
	op.Call = time.Since(c.base)
	ts, err := c.nodes[op.Node].BusyThresholds(octx, true)
	op.Return = time.Since(c.base)
	op.Result, _ = classifyCatalog(KindThresholdGet, err)
	if err != nil {
		op.Error = err.Error()
	} else {
		op.Output, op.Body = thresholdsOf(ts), encodeBody(ts)
	}
	c.h.Add(op)
}

// holdAndProbe books holds on node, for up to thresholdHoldFor, until
// every rank holds one (a hold answered busy, because other clients'
// bookings make some ranks busy for now, is tried again), probes once
// every rank is held by a hold, keeps the holds for thresholdTightFor,
// then frees them.
func (c *thresholdClient) holdAndProbe(ctx context.Context, node, seq int) {
	prompts := SelectionPrompts()
	var held []string
	ranks := map[[2]uint64]bool{}
	defer func() {
		_ = poll.Sleep(ctx, thresholdTightFor)
		for _, rid := range held {
			c.free(context.WithoutCancel(ctx), node, rid)
		}
	}()
	deadline := time.Now().Add(thresholdHoldFor)
	for k := 0; len(ranks) < c.ranks; k++ {
		if time.Now().After(deadline) {
			return
		}
		op := Op{Client: c.pid, Node: node, Kind: KindHold, ReservationID: fmt.Sprintf("jepsen-hold-%d-%d", seq, k)}
		booked := bookOnce(ctx, c.nodes[node], c.base, &op, prompts[k%len(prompts)])
		c.h.Add(op)
		switch {
		case booked == bookingMade:
			held = append(held, op.ReservationID)
			ranks[[2]uint64{op.Selected, uint64(op.Rank)}] = true
		case op.Busy:
			if poll.Sleep(ctx, thresholdHoldRetry) != nil {
				return
			}
		case booked == bookingMaybe:
			c.open.Add(op.ReservationID, node)
			return
		default:
			return // an error: nothing to judge this time
		}
	}
	// Every rank holds one of our prompts, over the tight threshold this
	// node has applied: a selection here must be shed.
	op := Op{Client: c.pid, Node: node, Kind: KindBusyProbe, ReservationID: fmt.Sprintf("jepsen-probe-%d", seq)}
	booked := bookOnce(ctx, c.nodes[node], c.base, &op, prompts[0])
	switch {
	case op.Busy:
		op.Result = ResultOK
	case booked == bookingMade:
		op.Result, op.Error = ResultFail, fmt.Sprintf("booked worker %d rank %d while every rank was held over a tight threshold", op.Selected, op.Rank)
		held = append(held, op.ReservationID)
	default:
		op.Result = ResultUnknown // no verdict from this answer
		if booked == bookingMaybe {
			c.open.Add(op.ReservationID, node)
		}
	}
	c.h.Add(op)
}

// free frees a hold on node, then on random nodes, for BookingRetryFor;
// one it cannot confirm is left to the sweep.
func (c *thresholdClient) free(ctx context.Context, node int, rid string) {
	op := Op{Client: c.pid, Node: node, Kind: KindHoldFree, ReservationID: rid, Result: ResultFail}
	op.Call = time.Since(c.base)
	deadline := time.Now().Add(BookingRetryFor)
	for {
		fctx, cancel := context.WithTimeout(ctx, OpTimeout)
		err := c.nodes[op.Node].Free(fctx, rid)
		cancel()
		var ce *client.Error
		switch {
		case err == nil:
			op.Result, op.Error = ResultOK, ""
		case errors.As(err, &ce) && ce.Code == api.CodeNotFound:
			op.NotFound, op.Error = true, err.Error()
		default:
			op.Error = err.Error()
		}
		if op.Result == ResultOK || time.Now().After(deadline) || poll.Sleep(ctx, bookingPause) != nil {
			break
		}
		op.Node = c.r.IntN(len(c.nodes))
	}
	op.Return = time.Since(c.base)
	c.h.Add(op)
	if op.Result != ResultOK {
		c.open.Add(rid, -1)
	}
}

// BusyWindow is a stretch during which a node may shed with a tight
// threshold.
type BusyWindow struct{ Start, End time.Duration }

// BusyWindows are the stretches a busy answer can be explained by: from
// the call of each tight threshold write (ok or unknown) to the return of
// the next acknowledged loose write or clear called after it returned,
// stretched over every nemesis window that overlaps its end (a node cut
// off may apply the loose write only after the heal), plus
// ThresholdLagBound. With no loose write after it, to the end of time.
func BusyWindows(ops []Op, faults []Window) []BusyWindow {
	var writes []Op
	for _, op := range ops {
		if (op.Kind == KindThresholdSet || op.Kind == KindThresholdClear) && op.Result != ResultFail {
			writes = append(writes, op)
		}
	}
	SortOps(writes)
	var out []BusyWindow
	for i, t := range writes {
		if !isTight(t) {
			continue
		}
		end := time.Duration(1<<62 - 1)
		for _, l := range writes[i+1:] {
			if !isTight(l) && l.Result == ResultOK && l.Call >= t.Return {
				end = stretchOverFaults(l.Return, faults) + ThresholdLagBound
				break
			}
		}
		out = append(out, BusyWindow{Start: t.Call, End: end})
	}
	return out
}

// isTight reports whether op writes the tight threshold.
func isTight(op Op) bool {
	return op.Kind == KindThresholdSet && strings.HasPrefix(op.Value, "decode="+strconv.FormatFloat(TightDecodeThreshold, 'g', -1, 64)+" ")
}

// stretchOverFaults moves t to the end of every fault window it falls in,
// repeatedly.
func stretchOverFaults(t time.Duration, faults []Window) time.Duration {
	for moved := true; moved; {
		moved = false
		for _, w := range faults {
			if w.Start <= t && t < w.End {
				t, moved = w.End, true
			}
		}
	}
	return t
}

// UnexplainedBusy lists the busy answers of selection clients that no
// BusyWindow explains.
func UnexplainedBusy(ops []Op, windows []BusyWindow) []Op {
	var out []Op
	for _, op := range ops {
		if op.Kind != KindSelectAndReserve || !op.Busy {
			continue
		}
		explained := false
		for _, w := range windows {
			if op.Return >= w.Start && op.Call <= w.End {
				explained = true
				break
			}
		}
		if !explained {
			out = append(out, op)
		}
	}
	return out
}
