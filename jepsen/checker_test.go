package jepsen

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
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

// withBodies gives the ok worker ops of a test history the answers a
// server would send, replaying the writes in call order (unknown ones as
// applied) with Raft indexes 1, 2, ...: a write answers its record, a
// delete the record it removed, a read the version of the record its
// Output names (none when that value was never written: a body that
// matches no state). An op that has a Body keeps it.
func withBodies(ops []Op) []Op {
	out := slices.Clone(ops)
	order := make([]int, len(out))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return cmpDuration(out[a].Call, out[b].Call) })
	cur := map[uint64]*api.Worker{}
	versions := map[string]api.Worker{}
	var index uint64
	answer := func(w api.Worker, catalogIndex uint64) string {
		return encodeBody(api.WorkerWritten{Worker: w, CatalogIndex: catalogIndex})
	}
	for _, i := range order {
		o := &out[i]
		if !o.IsCatalog() || o.Result == ResultFail {
			continue
		}
		id := o.WorkerID
		record := func(ep string, create, modify uint64) api.Worker {
			return api.Worker{WorkerID: id, ModelName: CatalogModelName, TenantID: "default", Endpoint: ep, BlockSize: CatalogBlockSize,
				DataParallelSize: 1, KVEventsEndpoints: map[uint32]string{}, CreateIndex: create, ModifyIndex: modify, BlockSizeIndex: create,
				Lifecycle: api.LifecycleIncomplete, NotSchedulableReasons: []string{CatalogWorkerReason}}
		}
		ok := o.Result == ResultOK && !o.NotFound && o.Body == ""
		switch o.Kind {
		case KindRegister, KindPatch:
			w := cur[id]
			if w == nil && o.Kind == KindPatch {
				continue
			}
			index++
			create := index
			if w != nil {
				create = w.CreateIndex
			}
			nw := record(o.Value, create, index)
			cur[id], versions[o.Value] = &nw, nw
			if ok {
				o.Output, o.Body = o.Value, answer(nw, index)
			}
		case KindDelete:
			w := cur[id]
			if w == nil {
				continue
			}
			index++
			delete(cur, id)
			if ok {
				removed := *w
				if o.Output != "" {
					removed = versions[o.Output]
					removed.WorkerID, removed.Endpoint = id, o.Output
				}
				o.Output, o.Body = removed.Endpoint, answer(removed, index)
				if removed.ModelName == "" { // a value never written
					o.Body = answer(record(o.Output, 0, 0), index)
				}
			}
		case KindGet:
			if ok {
				v, seen := versions[o.Output]
				if !seen {
					v = record(o.Output, 0, 0)
				}
				o.Body = answer(v, 0)
			}
		}
	}
	return out
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
			got := CheckCatalogLinearizable(withBodies(tt.ops), 10*time.Second)
			if got.Verdict != tt.want {
				t.Fatalf("verdict %s, want %s", got.Verdict, tt.want)
			}
		})
	}
}

// Test_CatalogModel_RejectsWrongAnswers feeds the model a legal history
// whose one answer is changed: the register's or the patch's body must be
// exactly what the server owes, or the history is not linearizable.
func Test_CatalogModel_RejectsWrongAnswers(t *testing.T) {
	legal := withBodies([]Op{
		op(0, KindRegister, "a", 0, 10, ResultOK),
		op(0, KindPatch, "b", 20, 30, ResultOK),
		read(1, "b", 40, 50),
		func() Op { o := op(0, KindDelete, "", 60, 70, ResultOK); o.Output = "b"; return o }(),
		op(0, KindRegister, "c", 80, 90, ResultOK),
	})
	if got := CheckCatalogLinearizable(legal, 10*time.Second); got.Verdict != VerdictYes {
		t.Fatalf("legal history: %s", got.Verdict)
	}
	edit := func(i int, f func(*api.WorkerWritten)) func([]Op) {
		return func(ops []Op) {
			var w api.WorkerWritten
			if err := json.Unmarshal([]byte(ops[i].Body), &w); err != nil {
				t.Fatal(err)
			}
			f(&w)
			ops[i].Body = encodeBody(w)
		}
	}
	for _, tc := range []struct {
		name   string
		change func([]Op)
	}{
		{"register answers no body", func(ops []Op) { ops[0].Body = "" }},
		{"register answers garbage", func(ops []Op) { ops[0].Body = "{" }},
		{"register answers another endpoint", edit(0, func(w *api.WorkerWritten) { w.Endpoint = "z" })},
		{"register answers another worker id", edit(0, func(w *api.WorkerWritten) { w.WorkerID = 2 })},
		{"register answers another model", edit(0, func(w *api.WorkerWritten) { w.ModelName = "other" })},
		{"register answers another block size", edit(0, func(w *api.WorkerWritten) { w.BlockSize = 32 })},
		{"register answers schedulable", edit(0, func(w *api.WorkerWritten) { w.Lifecycle, w.NotSchedulableReasons = api.LifecycleSchedulable, nil })},
		{"register answers a lease", edit(0, func(w *api.WorkerWritten) { w.LeaseTTLSeconds = 5 })},
		{"register answers no catalog index", edit(0, func(w *api.WorkerWritten) { w.CatalogIndex = 0 })},
		{"register's modify index is not its catalog index", edit(0, func(w *api.WorkerWritten) { w.ModifyIndex++ })},
		{"new record's create index is not its own", edit(0, func(w *api.WorkerWritten) { w.CreateIndex = 0 })},
		{"patch answers the old endpoint", edit(1, func(w *api.WorkerWritten) { w.Endpoint = "a" })},
		{"patch answers a new create index", edit(1, func(w *api.WorkerWritten) { w.CreateIndex = w.ModifyIndex })},
		{"patch answers an index before the register's", edit(1, func(w *api.WorkerWritten) { w.ModifyIndex, w.CatalogIndex = 1, 1 })},
		{"patch answers another tenant", edit(1, func(w *api.WorkerWritten) { w.TenantID = "t" })},
		{"read answers an older version", edit(2, func(w *api.WorkerWritten) { w.ModifyIndex = 1 })},
		{"delete answers another record", edit(3, func(w *api.WorkerWritten) { w.ModifyIndex = 1 })},
		{"delete answers no catalog index", edit(3, func(w *api.WorkerWritten) { w.CatalogIndex = 0 })},
		{"re-register keeps the old create index", edit(4, func(w *api.WorkerWritten) { w.CreateIndex = 1 })},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ops := slices.Clone(legal)
			tc.change(ops)
			if got := CheckCatalogLinearizable(ops, 10*time.Second); got.Verdict != VerdictNo {
				t.Fatalf("verdict %s, want no", got.Verdict)
			}
		})
	}
}

// thr builds a threshold op: a set of decode with tag, a clear, or a get
// answering value.
func thr(client int, kind string, decode float64, tag uint64, call, ret int, result string) Op {
	o := Op{Client: client, Kind: kind, Call: time.Duration(call) * ms, Return: time.Duration(ret) * ms, Result: result}
	if kind == KindThresholdSet {
		o.Value = ThresholdValue(&decode, &tag)
		if result == ResultOK {
			o.Output = o.Value
		}
	}
	return o
}

func Test_CatalogModel_Thresholds(t *testing.T) {
	get := func(client int, v string, call, ret int) Op {
		o := thr(client, KindThresholdGet, 0, 0, call, ret, ResultOK)
		o.Output = v
		return o
	}
	tight := ThresholdValue(api.Ptr(TightDecodeThreshold), api.Ptr(thresholdTag(1)))
	for _, tc := range []struct {
		name string
		ops  []Op
		want Verdict
	}{
		{"set, read, clear, read", []Op{thr(0, KindThresholdSet, TightDecodeThreshold, thresholdTag(1), 0, 10, ResultOK), get(1, tight, 20, 30),
			thr(0, KindThresholdClear, 0, 0, 40, 50, ResultOK), get(1, "", 60, 70)}, VerdictYes},
		{"a read misses an acknowledged set", []Op{thr(0, KindThresholdSet, TightDecodeThreshold, thresholdTag(1), 0, 10, ResultOK), get(1, "", 20, 30)}, VerdictNo},
		{"a set answers another value", []Op{func() Op {
			o := thr(0, KindThresholdSet, TightDecodeThreshold, thresholdTag(1), 0, 10, ResultOK)
			o.Output = ThresholdValue(api.Ptr(LooseDecodeThreshold), api.Ptr(thresholdTag(1)))
			return o
		}()}, VerdictNo},
		{"a clear answers a threshold", []Op{func() Op {
			o := thr(0, KindThresholdClear, 0, 0, 0, 10, ResultOK)
			o.Output = tight
			return o
		}()}, VerdictNo},
		{"an unknown set may apply later", []Op{thr(0, KindThresholdSet, TightDecodeThreshold, thresholdTag(1), 0, 10, ResultUnknown),
			get(1, "", 20, 30), get(1, tight, 40, 50)}, VerdictYes},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := CheckCatalogLinearizable(tc.ops, 10*time.Second); got.Verdict != tc.want {
				t.Fatalf("verdict %s, want %s", got.Verdict, tc.want)
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
	got := CheckCatalogLinearizable(withBodies([]Op{a, b, ra, rb}), 10*time.Second)
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
		{"threshold set lost", []Op{thr(0, KindThresholdSet, TightDecodeThreshold, 7, 0, 10, ResultOK)}, nil, 1},
		{"threshold clear kept", []Op{thr(0, KindThresholdSet, TightDecodeThreshold, 7, 0, 10, ResultOK), thr(0, KindThresholdClear, 0, 0, 20, 30, ResultOK)}, nil, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := CheckNoLostWrites(tt.ops, tt.final, ""); len(got) != tt.lost {
				t.Fatalf("lost %+v, want %d", got, tt.lost)
			}
		})
	}
}

// testToken is the token the fake nodes require on every request.
const testToken = "jepsen-test-token"

// authed refuses, as a node with --auth-scope all does, every request
// that lacks testToken, and fails the test: the harness must send it on
// every request it makes.
func authed(t *testing.T, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+testToken {
			t.Errorf("%s %s without the token", r.Method, r.URL.Path)
			writeJSON(w, http.StatusUnauthorized, api.Error{Message: "missing or invalid bearer token", Code: "unauthorized"})
			return
		}
		h.ServeHTTP(w, r)
	})
}

// serveAuthed serves h, behind authed, on loopback until the test ends;
// it returns the server's URL.
func serveAuthed(t *testing.T, h http.Handler) string {
	srv := httptest.NewServer(authed(t, h))
	t.Cleanup(srv.Close)
	return srv.URL
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
	mux.HandleFunc("GET /busy_threshold", reply(api.BusyThresholds{Thresholds: []api.BusyThreshold{}}))
	mux.HandleFunc("POST /overlap_scores", reply(scores))
	mux.HandleFunc("GET /loads", reply(loads))
	mux.HandleFunc("GET /reservations", reply(api.ReservationPage{}))
	return serveAuthed(t, mux)
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

	check := func(name string, urls []string, wantOK bool, fn func(context.Context, Endpoints) error) {
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			defer cancel()
			err := fn(ctx, Endpoints{URLs: urls, Token: testToken})
			if (err == nil) != wantOK {
				t.Fatalf("err = %v, want ok=%v", err, wantOK)
			}
			if err != nil && !strings.Contains(err.Error(), bad[1]) {
				t.Fatalf("err = %v, want it to name the diverging node", err)
			}
		})
	}
	index := func(ctx context.Context, ep Endpoints) error { return CheckIndexConverged(ctx, ep, prompts) }
	loads := func(ctx context.Context, ep Endpoints) error { return CheckLoadsZero(ctx, ep, 200*time.Millisecond) }
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
	if got := CheckCatalogLinearizable(withBodies(ops), 50*ms); got.Verdict != VerdictInconclusive {
		t.Fatalf("verdict %s, want inconclusive", got.Verdict)
	}
}
