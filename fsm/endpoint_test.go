package fsm

import "testing"

// Test_ApplyKeepsEndpointsItDoesNotCheck: the HTTP layer refuses
// malformed worker endpoints (api.CheckWorkerEndpoint), but the catalog's
// apply must not: a log entry an older release accepted has to apply on
// every node, now and after any upgrade, exactly as it did.
func Test_ApplyKeepsEndpointsItDoesNotCheck(t *testing.T) {
	for _, ep := range []string{"worker:8000", "http://wor ker:8000", "http://worker:8000\n", "x"} {
		h := newHarness(t)
		w := completeWorker(1, 16)
		w.Endpoint = ep
		res := h.upsert(w)
		if res.Err != nil || !res.Worker.Schedulable() || res.Worker.Endpoint != ep {
			t.Fatalf("endpoint %q: err %v, worker %+v", ep, res.Err, res.Worker)
		}
	}
}
