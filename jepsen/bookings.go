package jepsen

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/kvselect/kvselect/api"
	"github.com/kvselect/kvselect/client"
	"github.com/kvselect/kvselect/internal/poll"
)

// OpenBookings are the bookings whose free the harness could not confirm
// during the run: reservation id → the node that may hold it (-1: any
// node, for an acknowledged booking). Safe for concurrent use; a nil
// value ignores Add.
type OpenBookings struct {
	mu sync.Mutex
	m  map[string]int
}

// NewOpenBookings returns an empty set.
func NewOpenBookings() *OpenBookings { return &OpenBookings{m: map[string]int{}} }

// Add records an open booking.
func (o *OpenBookings) Add(rid string, node int) {
	if o == nil {
		return
	}
	o.mu.Lock()
	o.m[rid] = node
	o.mu.Unlock()
}

// All returns a copy of the open bookings.
func (o *OpenBookings) All() map[string]int {
	if o == nil {
		return nil
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	return maps.Clone(o.m)
}

// SweepClient is the Client of the sweep's frees.
const SweepClient = 3 << 20

// sweepFor bounds how long SweepBookings tries one booking.
const sweepFor = 10 * time.Second

// SweepBookings frees, once the faults are healed, every booking whose
// free the clients could not confirm, as a caller retrying its free
// would: one that may exist only on the node asked (its answer was lost)
// is freed there, where a 404 proves it gone; an acknowledged one on any
// node that holds it (a 404 from every node: none does). Each booking is
// recorded as one free op. This is the harness settling its own
// unknowns, never the server's: a free the clients had acknowledged is
// not sent again, so a free replica sync lost still shows in the loads
// check. It returns the bookings it could not settle.
func SweepBookings(ctx context.Context, ep Endpoints, base time.Time, h *History, open *OpenBookings) error {
	nodes, err := pinnedClients(ep)
	if err != nil {
		return err
	}
	all := open.All()
	rids := slices.Sorted(maps.Keys(all))
	var left []string
	for _, rid := range rids {
		op := sweepOne(ctx, nodes, base, rid, all[rid])
		h.Add(op)
		if op.Result != ResultOK {
			left = append(left, fmt.Sprintf("%s (%s)", rid, op.Error))
		}
	}
	if len(left) > 0 {
		return fmt.Errorf("%d bookings could not be freed after the heal: %s", len(left), strings.Join(left, "; "))
	}
	return nil
}

func sweepOne(ctx context.Context, nodes []*client.Client, base time.Time, rid string, node int) Op {
	op := Op{Client: SweepClient, Node: node, Kind: KindFree, ReservationID: rid, Result: ResultUnknown, Call: time.Since(base)}
	defer func() { op.Return = time.Since(base) }()
	targets := []int{node}
	if node < 0 {
		targets = make([]int, len(nodes))
		for i := range targets {
			targets[i] = i
		}
	}
	deadline := time.Now().Add(sweepFor)
	for {
		absent := 0
		for _, i := range targets {
			fctx, cancel := context.WithTimeout(ctx, OpTimeout)
			err := nodes[i].Free(fctx, rid)
			cancel()
			op.Node = i
			var ce *client.Error
			switch {
			case err == nil:
				op.Result, op.Error = ResultOK, ""
				return op
			case errors.As(err, &ce) && ce.Code == api.CodeNotFound:
				absent++
			default:
				op.Error = err.Error()
			}
		}
		if absent == len(targets) {
			op.Result, op.NotFound, op.Error = ResultOK, true, ""
			return op
		}
		if time.Now().After(deadline) || poll.Sleep(ctx, bookingPause) != nil {
			return op
		}
	}
}

// LeftBookings lists every booking the nodes still hold: reservation id →
// its holders ("n1 local", "n2 peer of n1"), for ExplainLeft.
func LeftBookings(ctx context.Context, ep Endpoints) (map[string][]string, error) {
	nodes, err := pinnedClients(ep)
	if err != nil {
		return nil, err
	}
	out := map[string][]string{}
	for i, cl := range nodes {
		cursor := ""
		for {
			lctx, cancel := context.WithTimeout(ctx, OpTimeout)
			page, err := cl.Reservations(lctx, api.ReservationsQuery{Cursor: cursor})
			cancel()
			if err != nil {
				return out, fmt.Errorf("bookings of %s: %w", NodeID(i), err)
			}
			for _, r := range page.Reservations {
				holder := NodeID(i) + " " + r.Origin
				if r.Origin != api.OriginLocal {
					holder += " of " + r.OriginNode
				}
				out[r.ReservationID] = append(out[r.ReservationID], holder)
			}
			if cursor = page.NextCursor; cursor == "" {
				break
			}
		}
	}
	return out, nil
}

// ExplainLeft groups the bookings left after the heal by what the
// history says of them: which node acknowledged their free, during which
// fault (a free replica sync lost there), or that no free was ever
// acknowledged. One line per group, with a few examples.
func ExplainLeft(ops []Op, windows []Window, left map[string][]string) []string {
	byRID := map[string][]Op{}
	for _, op := range ops {
		if op.ReservationID != "" {
			byRID[op.ReservationID] = append(byRID[op.ReservationID], op)
		}
	}
	groups := map[string][]string{}
	for _, rid := range slices.Sorted(maps.Keys(left)) {
		why := "no free of it was acknowledged"
		booked := "not booked by the workload"
		for _, op := range byRID[rid] {
			switch {
			case (op.Kind == KindSelectAndReserve || op.Kind == KindHold || op.Kind == KindBusyProbe) && op.Result != ResultFail:
				booked = fmt.Sprintf("booked on %s at %v", NodeID(op.Node), op.Call.Round(time.Millisecond))
			case (op.Kind == KindFree || op.Kind == KindHoldFree) && op.Result == ResultOK && !op.NotFound:
				why = fmt.Sprintf("freed (acknowledged) by %s outside any fault", NodeID(op.Node))
				for _, w := range windows {
					if op.Call <= w.End && op.Return >= w.Start {
						why = fmt.Sprintf("freed (acknowledged) by %s during %s (%s)", NodeID(op.Node), w.Name, w.Detail)
						break
					}
				}
			}
		}
		groups[why] = append(groups[why], fmt.Sprintf("%s (%s; held by %s)", rid, booked, strings.Join(left[rid], ", ")))
	}
	var out []string
	for _, why := range slices.Sorted(maps.Keys(groups)) {
		ex := groups[why]
		n := len(ex)
		if len(ex) > 3 {
			ex = append(ex[:3:3], "...")
		}
		out = append(out, fmt.Sprintf("%d bookings left, %s: %s", n, why, strings.Join(ex, "; ")))
	}
	return out
}
