package jepsen

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kvselect/kvselect/api"
)

// Test_SweepBookings: a booking open on one node is freed there; an
// acknowledged one wherever a node holds it, or proven gone by a 404 from
// every node; one no node will free is reported.
func Test_SweepBookings(t *testing.T) {
	var mu sync.Mutex
	held := map[int]map[string]bool{0: {"a": true}, 1: {"b": true}, 2: {}}
	node := func(i int) string {
		mux := http.NewServeMux()
		mux.HandleFunc("DELETE /reservations/{id}", func(w http.ResponseWriter, r *http.Request) {
			mu.Lock()
			defer mu.Unlock()
			switch id := r.PathValue("id"); {
			case id == "stuck":
				writeJSON(w, 500, api.Error{Message: "internal", Code: api.CodeInternal})
			case held[i][id]:
				delete(held[i], id)
				writeJSON(w, 200, struct{}{})
			default:
				writeJSON(w, 404, api.Error{Message: "no such reservation", Code: api.CodeNotFound})
			}
		})
		return serveAuthed(t, mux)
	}
	ep := Endpoints{URLs: []string{node(0), node(1), node(2)}, Token: testToken}
	open := NewOpenBookings()
	open.Add("a", 0)     // unknown select on n1
	open.Add("b", -1)    // acknowledged, held by n2
	open.Add("gone", -1) // acknowledged, held nowhere
	open.Add("stuck", 2) // n3 cannot answer
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	h := NewHistory()
	err := SweepBookings(ctx, ep, time.Now(), h, open)
	if err == nil || !strings.Contains(err.Error(), "1 bookings could not be freed") || !strings.Contains(err.Error(), "stuck") {
		t.Fatalf("err %v", err)
	}
	got := map[string]Op{}
	for _, op := range h.Ops() {
		got[op.ReservationID] = op
	}
	if a := got["a"]; a.Result != ResultOK || a.NotFound || a.Node != 0 || a.Client != SweepClient || a.Kind != KindFree {
		t.Errorf("a: %+v", a)
	}
	if b := got["b"]; b.Result != ResultOK || b.Node != 1 {
		t.Errorf("b: %+v", b)
	}
	if g := got["gone"]; g.Result != ResultOK || !g.NotFound {
		t.Errorf("gone: %+v", g)
	}
	if s := got["stuck"]; s.Result != ResultUnknown {
		t.Errorf("stuck: %+v", s)
	}
	if len(held[0])+len(held[1]) != 0 {
		t.Errorf("left %v", held)
	}
}

func Test_ExplainLeft(t *testing.T) {
	book := func(rid string, node, call int) Op {
		o := sel(node, ResultOK, call, call+5)
		o.ReservationID = rid
		return o
	}
	free := func(rid string, node, call int, result string) Op {
		return Op{Node: node, Kind: KindFree, ReservationID: rid, Call: time.Duration(call) * ms, Return: time.Duration(call+5) * ms, Result: result}
	}
	ops := []Op{book("r1", 0, 100), free("r1", 2, 110, ResultOK), book("r2", 0, 200), free("r2", 2, 210, ResultOK),
		book("r3", 1, 300), free("r3", 1, 310, ResultUnknown), book("r4", 0, 5000), free("r4", 1, 5010, ResultOK)}
	windows := []Window{{Name: "member-remove-rejoin", Start: 90 * ms, End: 400 * ms, Detail: "remove n3"}}
	left := map[string][]string{"r1": {"n1 local"}, "r2": {"n1 local", "n2 peer of n1"}, "r3": {"n2 local"}, "r4": {"n1 local"}, "r9": {"n3 local"}}
	got := strings.Join(ExplainLeft(ops, windows, left), "\n")
	for _, want := range []string{
		"2 bookings left, freed (acknowledged) by n3 during member-remove-rejoin (remove n3): r1 (booked on n1 at 100ms; held by n1 local); r2",
		"1 bookings left, freed (acknowledged) by n2 outside any fault: r4",
		"2 bookings left, no free of it was acknowledged: r3 (booked on n2 at 300ms; held by n2 local); r9 (not booked by the workload; held by n3 local)",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("explanation lacks %q:\n%s", want, got)
		}
	}
}
