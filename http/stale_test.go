package http

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/kvselect/kvselect/api"
	"github.com/kvselect/kvselect/fsm"
	"github.com/kvselect/kvselect/ingest"
)

// Test_SchedulableHere: reads show, next to the catalog's lifecycle, whether
// this node would select the worker: not when every rank's KV event
// listener is stale here (SPEC §3.7), nor when the catalog does not
// schedule it. /workers, one worker's read and /ready agree, and /ready
// counts only the workers this node would select. A write answer is the
// leader's record, not this node's view: it carries neither listeners nor
// schedulable_here.
func Test_SchedulableHere(t *testing.T) {
	f := newFakeNode()
	register := func(id uint64, ranks uint32, endpoint string) {
		t.Helper()
		eps := map[uint32]string{}
		for r := range ranks {
			eps[r] = "tcp://h:1"
		}
		if _, err := f.log.Apply(fsm.UpsertWorker{Worker: fsm.Worker{WorkerID: id, ModelName: "m", Endpoint: endpoint,
			BlockSize: 16, DataParallelSize: ranks, KVEventsEndpoints: eps}}); err != nil {
			t.Fatal(err)
		}
	}
	register(1, 2, "http://w1") // one of two ranks stale: still selected here
	register(2, 2, "http://w2") // every rank stale: not selected here
	register(3, 1, "")          // incomplete: selected nowhere
	register(4, 1, "http://w4") // no listener status (none yet): selected
	listeners := map[uint64]map[uint32]ingest.RankStatus{
		1: {0: {State: ingest.StateFailed, Stale: true}, 1: {State: ingest.StateActive}},
		2: {0: {State: ingest.StateFailed, Stale: true}, 1: {State: ingest.StateConnecting, Stale: true}},
	}
	url := serve(t, f.service(func(c *Config) {
		c.Listeners = func(id uint64) map[uint32]ingest.RankStatus { return listeners[id] }
	}))
	want := map[uint64]bool{1: true, 2: false, 3: false, 4: true}
	checkOne := func(where string, w api.Worker) {
		t.Helper()
		if w.SchedulableHere == nil || *w.SchedulableHere != want[w.WorkerID] {
			t.Errorf("%s: worker %d schedulable_here %v, want %v", where, w.WorkerID, w.SchedulableHere, want[w.WorkerID])
		}
		if w.WorkerID == 2 && w.Lifecycle != api.LifecycleSchedulable {
			t.Errorf("%s: worker 2 lifecycle %q: staleness must not change it", where, w.Lifecycle)
		}
		if l, ok := w.Listeners[0]; w.WorkerID <= 2 && (!ok || l.State != api.ListenerStale) {
			t.Errorf("%s: worker %d rank 0 listener %+v, want stale", where, w.WorkerID, l)
		}
	}
	check := func(where string, ws []api.Worker) {
		t.Helper()
		if len(ws) != len(want) {
			t.Fatalf("%s: %d workers, want %d", where, len(ws), len(want))
		}
		for _, w := range ws {
			checkOne(where, w)
		}
	}
	decode := func(path string, v any) int {
		t.Helper()
		status, _, body := call(t, "GET", url+path, "")
		if err := json.Unmarshal([]byte(body), v); err != nil {
			t.Fatalf("GET %s: %d %s: %v", path, status, body, err)
		}
		return status
	}

	var list []api.Worker
	if status := decode("/workers", &list); status != 200 {
		t.Fatalf("GET /workers: %d", status)
	}
	check("GET /workers", list)
	var ready api.Ready
	if status := decode("/ready", &ready); status != 200 || ready.SchedulableWorkers != 2 {
		t.Fatalf("GET /ready: %d, schedulable_workers %d, want 200 and 2 (workers 1 and 4)", status, ready.SchedulableWorkers)
	}
	check("GET /ready", ready.Workers)
	for id := range want {
		path := fmt.Sprintf("/workers/%d", id)
		var one api.Worker
		if status := decode(path, &one); status != 200 {
			t.Fatalf("GET %s: %d", path, status)
		}
		checkOne("GET "+path, one)
	}

	status, _, body := call(t, "PATCH", url+"/workers/2", `{"endpoint":"http://w2b"}`)
	var written map[string]any
	if err := json.Unmarshal([]byte(body), &written); err != nil || status != 200 {
		t.Fatalf("PATCH /workers/2: %d %s: %v", status, body, err)
	}
	for _, local := range []string{"schedulable_here", "listeners"} {
		if _, ok := written[local]; ok {
			t.Errorf("PATCH answer carries %s, local state of no node in particular: %s", local, body)
		}
	}
}
