package jepsen

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kvselect/kvselect/api"
	"github.com/kvselect/kvselect/internal/poll"
)

// cancelWhen cancels a run once done holds, checked every pollEvery. Its
// result, deferred, cancels the run and waits for the watcher: so a test
// whose run ends for another reason leaves nothing behind.
func cancelWhen(ctx context.Context, cancel context.CancelFunc, what string, done func() bool) (stop func()) {
	var watch sync.WaitGroup
	watch.Go(func() {
		_ = poll.Until(ctx, pollEvery, what, func(context.Context) error {
			if !done() {
				return context.DeadlineExceeded
			}
			cancel()
			return nil
		})
	})
	return func() {
		cancel()
		watch.Wait()
	}
}

// fakeCatalog is one linearizable catalog (a map under a lock) served by
// several fake nodes that misbehave in set ways.
type fakeCatalog struct {
	mu      sync.Mutex
	index   uint64 // the last write's, as a Raft index
	workers map[uint64]api.Worker
	served  atomic.Int64
	stopAt  int64
	stop    context.CancelFunc
}

// Fake node behaviours for writes.
const (
	fakeHonest     = iota
	fakeNotLeader  // answers not_leader without writing
	fakeLostAnswer // writes, then answers unknown_outcome
	fakeStaleReads // writes honestly, reads a catalog frozen empty
)

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}

func (f *fakeCatalog) node(t *testing.T, behaviour int) string {
	mux := http.NewServeMux()
	write := func(apply func(r *http.Request) (int, any)) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			defer f.count()
			if behaviour == fakeNotLeader {
				writeJSON(w, 503, api.Error{Message: "not the leader", Code: api.CodeNotLeader})
				return
			}
			f.mu.Lock()
			status, body := apply(r)
			f.mu.Unlock()
			if behaviour == fakeLostAnswer {
				writeJSON(w, 503, api.Error{Message: "leadership lost", Code: api.CodeUnknownOutcome})
				return
			}
			writeJSON(w, status, body)
		}
	}
	notFound := api.Error{Message: "worker not found", Code: api.CodeNotFound}
	id := func(r *http.Request) uint64 { n, _ := strconv.ParseUint(r.PathValue("id"), 10, 64); return n }
	// Records as a server stores them: the registration's fields, the
	// lifecycle a worker without KV event endpoints has, Raft indexes.
	mux.HandleFunc("POST /workers", write(func(r *http.Request) (int, any) {
		var p api.WorkerFields
		if err := json.NewDecoder(r.Body).Decode(&p); err != nil || p.WorkerID == nil || p.Endpoint == nil || p.ModelName == nil || p.BlockSize == nil {
			return 400, api.Error{Message: "bad body", Code: api.CodeBadRequest}
		}
		f.index++
		w := api.Worker{WorkerID: *p.WorkerID, ModelName: *p.ModelName, TenantID: "default", Endpoint: *p.Endpoint, BlockSize: *p.BlockSize,
			DataParallelSize: 1, KVEventsEndpoints: map[uint32]string{}, CreateIndex: f.index, ModifyIndex: f.index, BlockSizeIndex: f.index,
			Lifecycle: api.LifecycleIncomplete, NotSchedulableReasons: []string{CatalogWorkerReason}}
		if old, ok := f.workers[w.WorkerID]; ok {
			w.CreateIndex, w.BlockSizeIndex = old.CreateIndex, old.BlockSizeIndex
		}
		f.workers[w.WorkerID] = w
		return 201, api.WorkerWritten{Worker: w, CatalogIndex: f.index}
	}))
	mux.HandleFunc("PATCH /workers/{id}", write(func(r *http.Request) (int, any) {
		var p api.WorkerFields
		json.NewDecoder(r.Body).Decode(&p)
		w, ok := f.workers[id(r)]
		if !ok {
			return 404, notFound
		}
		f.index++
		w.Endpoint, w.ModifyIndex = *p.Endpoint, f.index
		f.workers[w.WorkerID] = w
		return 200, api.WorkerWritten{Worker: w, CatalogIndex: f.index}
	}))
	mux.HandleFunc("DELETE /workers/{id}", write(func(r *http.Request) (int, any) {
		w, ok := f.workers[id(r)]
		if !ok {
			return 404, notFound
		}
		f.index++
		delete(f.workers, w.WorkerID)
		return 200, api.WorkerWritten{Worker: w, CatalogIndex: f.index}
	}))
	mux.HandleFunc("GET /workers/{id}", func(w http.ResponseWriter, r *http.Request) {
		defer f.count()
		if r.URL.Query().Get(api.QueryConsistency) != api.ConsistencyLinearizable {
			t.Errorf("catalog read without consistency=linearizable: %s", r.URL)
		}
		f.mu.Lock()
		rec, ok := f.workers[id(r)]
		f.mu.Unlock()
		if !ok || behaviour == fakeStaleReads {
			writeJSON(w, 404, notFound)
			return
		}
		writeJSON(w, 200, rec)
	})
	return serveAuthed(t, mux)
}

// count ends the run once the fake nodes served stopAt requests.
func (f *fakeCatalog) count() {
	if f.served.Add(1) == f.stopAt {
		f.stop()
	}
}

func Test_RunCatalogClients(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	f := &fakeCatalog{workers: map[uint64]api.Worker{}, stopAt: 300, stop: cancel}
	urls := []string{f.node(t, fakeHonest), f.node(t, fakeNotLeader), f.node(t, fakeLostAnswer)}
	h := NewHistory()
	ids := []uint64{100, 101, 102, 103}
	const clients = 4
	if err := RunCatalogClients(ctx, Endpoints{URLs: urls, Token: testToken}, time.Now(), clients, ids, h); err != nil {
		t.Fatal(err)
	}
	ops := h.Ops()
	kinds, results := map[string]int{}, map[string]int{}
	freshIDs, newProcess := false, false
	for _, op := range ops {
		kinds[op.Kind]++
		results[op.Result]++
		if op.Return < op.Call {
			t.Fatalf("op returned before its call: %+v", op)
		}
		switch {
		case strings.Contains(op.Error, "context canceled"):
			// Cut short by the end of the run.
		case op.Node == 1 && op.IsWrite() && op.Result != ResultFail:
			t.Fatalf("a not_leader answer was not a failure: %+v", op)
		case op.Node == 2 && op.IsWrite() && op.Result != ResultUnknown:
			t.Fatalf("an unknown_outcome answer was not unknown: %+v", op)
		case op.Node == 0 && op.Result == ResultFail:
			t.Fatalf("an honest node's answer failed: %+v", op)
		}
		freshIDs = freshIDs || op.WorkerID > 103
		newProcess = newProcess || op.Client >= clients
	}
	for _, k := range []string{KindRegister, KindPatch, KindDelete, KindGet} {
		if kinds[k] == 0 {
			t.Errorf("no %s in %d ops", k, len(ops))
		}
	}
	if results[ResultOK] == 0 || results[ResultFail] == 0 || results[ResultUnknown] == 0 {
		t.Errorf("results %v, want some of each", results)
	}
	if !freshIDs || !newProcess {
		t.Errorf("after unknown writes: fresh worker ids %v, new processes %v", freshIDs, newProcess)
	}
	if c := CheckCatalogLinearizable(ops, 30*time.Second); c.Verdict != VerdictYes {
		t.Fatalf("history of a linearizable fake is %s", c.Verdict)
	}
	// A handler cut short by the end of the run may still be writing.
	var final []api.Worker
	f.mu.Lock()
	for _, w := range f.workers {
		final = append(final, w)
	}
	f.mu.Unlock()
	if lost := CheckNoLostWrites(ops, final, ""); len(lost) > 0 {
		t.Fatalf("lost writes on a fake that loses none: %+v", lost)
	}
}

// Test_RunCatalogClients_StaleReadsAreCaught runs the workload and the
// checker against a node whose linearizable reads are stale: the checker
// must reject the history.
func Test_RunCatalogClients_StaleReadsAreCaught(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	f := &fakeCatalog{workers: map[uint64]api.Worker{}, stopAt: 300, stop: cancel}
	urls := []string{f.node(t, fakeHonest), f.node(t, fakeStaleReads)}
	h := NewHistory()
	if err := RunCatalogClients(ctx, Endpoints{URLs: urls, Token: testToken}, time.Now(), 4, []uint64{1, 2}, h); err != nil {
		t.Fatal(err)
	}
	if c := CheckCatalogLinearizable(h.Ops(), 30*time.Second); c.Verdict != VerdictNo {
		t.Fatalf("history with stale reads is %s, want no", c.Verdict)
	}
}

// fakeBookings serves the selection routes over one shared booking set
// (reservation id → the node that booked it); a lagging node answers 404
// to the first call on each booking made elsewhere, as if replica sync
// had not brought it yet.
type fakeBookings struct {
	mu      sync.Mutex
	booked  map[string]int
	seen    map[string]bool
	selects atomic.Int64
	stopAt  int64
	stop    context.CancelFunc
	servers []*httptest.Server
}

// quiesce closes the fake nodes, waiting for the requests they are still
// serving: the run's end cancels the clients, not the handlers.
func (f *fakeBookings) quiesce() {
	for _, srv := range f.servers {
		srv.Close()
	}
}

func (f *fakeBookings) node(t *testing.T, self int, lagging bool) string {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /select_and_reserve", func(w http.ResponseWriter, r *http.Request) {
		var req api.SelectRequest
		json.NewDecoder(r.Body).Decode(&req)
		f.mu.Lock()
		f.booked[string(req.ReservationID)] = self
		f.mu.Unlock()
		writeJSON(w, 200, api.Selection{ReservationID: string(req.ReservationID), WorkerID: 7})
		if f.selects.Add(1) == f.stopAt {
			f.stop()
		}
	})
	booking := func(free bool) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			rid := r.PathValue("id")
			f.mu.Lock()
			defer f.mu.Unlock()
			at, ok := f.booked[rid]
			if lagging && ok && at != self && !f.seen[rid] {
				f.seen[rid] = true
				writeJSON(w, 404, api.Error{Message: "not yet", Code: api.CodeNotFound})
				return
			}
			if !ok {
				writeJSON(w, 404, api.Error{Message: "no such reservation", Code: api.CodeNotFound})
				return
			}
			if free {
				delete(f.booked, rid)
			}
			writeJSON(w, 200, struct{}{})
		}
	}
	mux.HandleFunc("POST /reservations/{id}/prefill_complete", booking(false))
	mux.HandleFunc("DELETE /reservations/{id}", booking(true))
	srv := httptest.NewServer(authed(t, mux))
	t.Cleanup(srv.Close)
	f.servers = append(f.servers, srv)
	return srv.URL
}

func Test_RunSelectionClients(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	f := &fakeBookings{booked: map[string]int{}, seen: map[string]bool{}, stopAt: 30, stop: cancel}
	urls := []string{f.node(t, 0, false), f.node(t, 1, true), f.node(t, 2, false)}
	h := NewHistory()
	if err := RunSelectionClients(ctx, Endpoints{URLs: urls, Token: testToken}, time.Now(), h, NewOpenBookings()); err != nil {
		t.Fatal(err)
	}
	f.quiesce()
	f.mu.Lock()
	defer f.mu.Unlock()
	counts, cutShort := map[string]int{}, map[string]bool{}
	for _, op := range h.Ops() {
		// The run's end may cut the last selections short.
		cut := op.Kind == KindSelectAndReserve && op.Result == ResultUnknown && strings.Contains(op.Error, "context canceled")
		if op.Result != ResultOK && !cut {
			t.Fatalf("op failed on a healthy fake: %+v", op)
		}
		if cut {
			cutShort[op.ReservationID] = true
		}
		counts[op.Kind+" "+op.Result]++
	}
	selected := counts[KindSelectAndReserve+" ok"]
	if selected < 27 || counts[KindPrefillComplete+" ok"] != selected ||
		counts[KindFree+" ok"] != selected+counts[KindSelectAndReserve+" unknown"] {
		t.Fatalf("counts %v: every booking should be completed and freed", counts)
	}
	if len(f.seen) == 0 {
		t.Error("no booking call met the lagging node")
	}
	// A selection cut short may still be booked by its handler after the
	// client's free found nothing there: a booking a real node would let
	// expire. Any other booking left was not freed.
	for rid := range f.booked {
		if !cutShort[rid] {
			t.Fatalf("booking %s left: %v", rid, f.booked)
		}
	}
	if u := MaxUnavailability(h.Ops(), len(urls), nil); u[0] != 0 || u[1] != 0 || u[2] != 0 {
		t.Fatalf("unavailability %v on healthy fakes", u)
	}
}

// Test_SelectionClients_UnsettledFreeIsOpen: a free whose answer was lost
// on one node and that another node answers 404 is not done (the booking
// may live on where it was made); it stays open for the sweep. Here the
// node that booked refuses the free, another loses its answer, the third
// never heard of the booking.
func Test_SelectionClients_UnsettledFreeIsOpen(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	node := func(behaviour int) string {
		mux := http.NewServeMux()
		mux.HandleFunc("POST /select_and_reserve", func(w http.ResponseWriter, r *http.Request) {
			var req api.SelectRequest
			json.NewDecoder(r.Body).Decode(&req)
			writeJSON(w, 200, api.Selection{ReservationID: string(req.ReservationID), WorkerID: 7})
		})
		mux.HandleFunc("POST /reservations/{id}/prefill_complete", func(w http.ResponseWriter, r *http.Request) { writeJSON(w, 200, struct{}{}) })
		mux.HandleFunc("DELETE /reservations/{id}", func(w http.ResponseWriter, r *http.Request) {
			switch behaviour {
			case 0:
				writeJSON(w, 500, api.Error{Message: "internal", Code: api.CodeInternal})
			case 1:
				conn, _, err := w.(http.Hijacker).Hijack()
				if err == nil {
					conn.Close() // the answer is lost
				}
			default:
				writeJSON(w, 404, api.Error{Message: "no such reservation", Code: api.CodeNotFound})
			}
		})
		return serveAuthed(t, mux)
	}
	urls := []string{node(0), node(1), node(2)}
	h := NewHistory()
	open := NewOpenBookings()
	// One settled booking (its free given up) is enough.
	defer cancelWhen(ctx, cancel, "a free given up", func() bool { return len(open.All()) > 0 })()
	if err := RunSelectionClients(ctx, Endpoints{URLs: urls, Token: testToken}, time.Now(), h, open); err != nil {
		t.Fatal(err)
	}
	booked := 0
	for _, op := range h.Ops() {
		switch {
		case op.Kind == KindSelectAndReserve && op.Result == ResultOK:
			booked++
			if n, ok := open.All()[op.ReservationID]; !ok || n != -1 {
				t.Errorf("booking %s not open for the sweep: %v", op.ReservationID, open.All())
			}
		case op.Kind == KindFree && op.Result == ResultOK:
			t.Errorf("a free no node accepted counts as done: %+v", op)
		}
	}
	if booked == 0 {
		t.Fatal("nothing booked")
	}
}
