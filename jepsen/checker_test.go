package jepsen

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/kvselect/kvselect/api"
)

const ms = time.Millisecond

// op builds a catalog op on worker 1 over [call, ret] milliseconds.
func op(client int, kind, value string, call, ret int, result string) Op {
	return Op{Client: client, Kind: kind, WorkerID: 1, Value: value, Call: time.Duration(call) * ms, Return: time.Duration(ret) * ms, Result: result}
}

func read(client int, value string, call, ret int) Op {
	o := op(client, KindGet, "", call, ret, ResultOK)
	o.Output, o.NotFound = value, value == ""
	return o
}

func Test_CheckCatalogLinearizable(t *testing.T) {
	tests := []struct {
		name string
		ops  []Op
		want Verdict
	}{
		{"sequential register then read", []Op{op(0, KindRegister, "a", 0, 10, ResultOK), read(1, "a", 20, 30)}, VerdictYes},
		{"stale read after acknowledged write", []Op{
			op(0, KindRegister, "a", 0, 10, ResultOK),
			op(0, KindRegister, "b", 20, 30, ResultOK),
			read(1, "a", 40, 50),
		}, VerdictNo},
		{"read of absent after acknowledged register", []Op{op(0, KindRegister, "a", 0, 10, ResultOK), read(1, "", 20, 30)}, VerdictNo},
		{"concurrent read may see either", []Op{
			op(0, KindRegister, "a", 0, 10, ResultOK),
			op(0, KindRegister, "b", 20, 40, ResultOK),
			read(1, "a", 25, 30),
			read(2, "b", 31, 35),
		}, VerdictYes},
		{"read going back in time", []Op{
			op(0, KindRegister, "a", 0, 10, ResultOK),
			op(0, KindRegister, "b", 20, 60, ResultOK),
			read(1, "b", 25, 30),
			read(2, "a", 31, 35),
		}, VerdictNo},
		{"unknown write that applied", []Op{
			op(0, KindRegister, "a", 0, 10, ResultOK),
			op(0, KindRegister, "b", 20, 30, ResultUnknown),
			read(1, "b", 40, 50),
		}, VerdictYes},
		{"unknown write that did not apply", []Op{
			op(0, KindRegister, "a", 0, 10, ResultOK),
			op(0, KindRegister, "b", 20, 30, ResultUnknown),
			read(1, "a", 40, 50),
		}, VerdictYes},
		{"unknown write applied late", []Op{
			op(0, KindRegister, "a", 0, 10, ResultOK),
			op(0, KindRegister, "b", 20, 30, ResultUnknown),
			read(1, "a", 40, 50),
			read(1, "b", 60, 70),
		}, VerdictYes},
		{"unknown write cannot be undone", []Op{
			op(0, KindRegister, "a", 0, 10, ResultOK),
			op(0, KindRegister, "b", 20, 30, ResultUnknown),
			read(1, "b", 40, 50),
			read(1, "a", 60, 70),
		}, VerdictNo},
		{"failed write is dropped", []Op{
			op(0, KindRegister, "a", 0, 10, ResultOK),
			op(0, KindRegister, "b", 20, 30, ResultFail),
			read(1, "a", 40, 50),
		}, VerdictYes},
		{"patch and delete", []Op{
			func() Op { o := op(0, KindPatch, "x", 0, 10, ResultOK); o.NotFound = true; return o }(),
			op(0, KindRegister, "a", 20, 30, ResultOK),
			op(0, KindPatch, "b", 40, 50, ResultOK),
			func() Op { o := op(0, KindDelete, "", 60, 70, ResultOK); o.Output = "b"; return o }(),
			read(1, "", 80, 90),
		}, VerdictYes},
		{"patch of a deleted worker succeeded", []Op{
			op(0, KindRegister, "a", 0, 10, ResultOK),
			op(0, KindDelete, "", 20, 30, ResultOK),
			op(0, KindPatch, "b", 40, 50, ResultOK),
		}, VerdictNo},
		{"delete removed another record", []Op{
			op(0, KindRegister, "a", 0, 10, ResultOK),
			func() Op { o := op(0, KindDelete, "", 20, 30, ResultOK); o.Output = "z"; return o }(),
		}, VerdictNo},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := CheckCatalogLinearizable(tt.ops, 10*time.Second)
			if got.Verdict != tt.want {
				t.Fatalf("verdict %s, want %s", got.Verdict, tt.want)
			}
		})
	}
}

func Test_CheckCatalogLinearizable_PartitionsPerWorker(t *testing.T) {
	a := op(0, KindRegister, "a", 0, 10, ResultOK)
	b := op(1, KindRegister, "b", 0, 10, ResultOK)
	b.WorkerID = 2
	ra, rb := read(2, "a", 20, 30), read(3, "b", 20, 30)
	rb.WorkerID = 2
	got := CheckCatalogLinearizable([]Op{a, b, ra, rb}, 10*time.Second)
	if got.Verdict != VerdictYes || got.WorkerIDs != 2 || got.Ops != 4 {
		t.Fatalf("got %+v, want yes over 2 worker ids and 4 ops", got)
	}
}

func Test_CheckNoLostWrites(t *testing.T) {
	worker := func(id uint64, ep string) api.Worker { return api.Worker{WorkerID: id, Endpoint: ep} }
	del := op(0, KindDelete, "", 20, 30, ResultOK)
	tests := []struct {
		name  string
		ops   []Op
		final []api.Worker
		lost  int
	}{
		{"last write present", []Op{op(0, KindRegister, "a", 0, 10, ResultOK), op(0, KindPatch, "b", 20, 30, ResultOK)}, []api.Worker{worker(1, "b")}, 0},
		{"lost write", []Op{op(0, KindRegister, "a", 0, 10, ResultOK), op(0, KindPatch, "b", 20, 30, ResultOK)}, []api.Worker{worker(1, "a")}, 1},
		{"lost register", []Op{op(0, KindRegister, "a", 0, 10, ResultOK)}, nil, 1},
		{"resurrected after delete", []Op{op(0, KindRegister, "a", 0, 10, ResultOK), del}, []api.Worker{worker(1, "a")}, 1},
		{"delete kept", []Op{op(0, KindRegister, "a", 0, 10, ResultOK), del}, nil, 0},
		{"later unknown write makes it undecided", []Op{op(0, KindRegister, "a", 0, 10, ResultOK), op(1, KindRegister, "b", 20, 30, ResultUnknown)}, []api.Worker{worker(1, "b")}, 0},
		{"concurrent ok write makes it undecided", []Op{op(0, KindRegister, "a", 0, 30, ResultOK), op(1, KindRegister, "b", 10, 20, ResultOK)}, []api.Worker{worker(1, "a")}, 0},
		{"failed write ignored", []Op{op(0, KindRegister, "a", 0, 10, ResultOK), op(1, KindRegister, "b", 20, 30, ResultFail)}, []api.Worker{worker(1, "b")}, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := CheckNoLostWrites(tt.ops, tt.final); len(got) != tt.lost {
				t.Fatalf("lost %+v, want %d", got, tt.lost)
			}
		})
	}
}

// fakeNode serves fixed answers for the routes the convergence checkers
// read.
func fakeNode(t *testing.T, workers []api.Worker, scores api.OverlapScores, loads []api.PartitionLoads) string {
	t.Helper()
	mux := http.NewServeMux()
	reply := func(v any) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			json.NewEncoder(w).Encode(v)
		}
	}
	mux.HandleFunc("GET /workers", reply(workers))
	mux.HandleFunc("POST /overlap_scores", reply(scores))
	mux.HandleFunc("GET /loads", reply(loads))
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv.URL
}

func Test_ConvergenceCheckers(t *testing.T) {
	w := []api.Worker{{WorkerID: 1, Endpoint: "http://a", Lifecycle: api.LifecycleSchedulable}}
	wListeners := []api.Worker{{WorkerID: 1, Endpoint: "http://a", Lifecycle: api.LifecycleSchedulable,
		Listeners: map[uint32]api.ListenerStatus{0: {}}}}
	wOther := []api.Worker{{WorkerID: 1, Endpoint: "http://b", Lifecycle: api.LifecycleSchedulable}}
	s := api.OverlapScores{BlockSize: 16, NumBlocks: 4, Workers: []api.OverlapRow{{WorkerID: 1, DeviceBlocks: 4}}}
	sOther := api.OverlapScores{BlockSize: 16, NumBlocks: 4, Workers: []api.OverlapRow{{WorkerID: 1, DeviceBlocks: 3}}}
	zero := []api.PartitionLoads{{ModelName: "default", TenantID: "default", Loads: []api.RankLoad{{WorkerID: 1}}}}
	busy := []api.PartitionLoads{{ModelName: "default", TenantID: "default", Loads: []api.RankLoad{{WorkerID: 1, ActiveRequests: 1}}}}
	prompts := []api.Prompt{{TokenIDs: api.TokenIDs{1, 2, 3}}}

	good := []string{fakeNode(t, w, s, zero), fakeNode(t, wListeners, s, zero), fakeNode(t, w, s, zero)}
	bad := []string{fakeNode(t, w, s, zero), fakeNode(t, wOther, sOther, busy)}

	check := func(name string, urls []string, wantOK bool, fn func(context.Context, []string) error) {
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			defer cancel()
			err := fn(ctx, urls)
			if (err == nil) != wantOK {
				t.Fatalf("err = %v, want ok=%v", err, wantOK)
			}
			if err != nil && !strings.Contains(err.Error(), bad[1]) {
				t.Fatalf("err = %v, want it to name the diverging node", err)
			}
		})
	}
	index := func(ctx context.Context, urls []string) error { return CheckIndexConverged(ctx, urls, prompts) }
	loads := func(ctx context.Context, urls []string) error { return CheckLoadsZero(ctx, urls, time.Second) }
	check("catalog converged, listeners ignored", good, true, CheckCatalogConverged)
	check("catalog diverged", bad, false, CheckCatalogConverged)
	check("index converged", good, true, index)
	check("index diverged", bad, false, index)
	check("loads zero", good, true, loads)
	check("loads left", bad, false, loads)
}

// Test_CheckCatalogLinearizable_TimeoutIsInconclusive gives porcupine a
// search it cannot finish in time: many open unknown writes and a read of
// a value never written. The verdict must be inconclusive, never yes.
func Test_CheckCatalogLinearizable_TimeoutIsInconclusive(t *testing.T) {
	var ops []Op
	for i := range 40 {
		ops = append(ops, op(i, KindRegister, fmt.Sprint("v", i), i, i+1, ResultUnknown))
		ops = append(ops, read(100+i, fmt.Sprint("v", i), 50+i, 51+i))
	}
	ops = append(ops, read(200, "never-written", 100, 101))
	if got := CheckCatalogLinearizable(ops, 50*ms); got.Verdict != VerdictInconclusive {
		t.Fatalf("verdict %s, want inconclusive", got.Verdict)
	}
}
