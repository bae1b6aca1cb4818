package http

import (
	"errors"
	"testing"

	"github.com/kvselect/kvselect/api"
	"github.com/kvselect/kvselect/fsm"
)

// FuzzDecodeSelect runs the full decode and validation of a selection body
// on arbitrary bytes: it either yields a prompt that satisfies the API's
// invariants or a 400, and never panics.
func FuzzDecodeSelect(f *testing.F) {
	// Seeds: testdata/fuzz/FuzzDecodeSelect.
	f.Fuzz(func(t *testing.T, body []byte) {
		var in api.SelectRequest
		if err := decodeJSON(body, &in); err != nil {
			if !errors.Is(err, errBadRequest) {
				t.Fatalf("decode error is not a 400: %v", err)
			}
			return
		}
		if _, err := partitionOf(&in.Prompt); err != nil && !errors.Is(err, errBadRequest) {
			t.Fatalf("partition error is not a 400: %v", err)
		}
		if _, err := overrideOf(in.RouterConfigOverride); err != nil && !errors.Is(err, errBadRequest) {
			t.Fatalf("override error is not a 400: %v", err)
		}
		pr, err := promptOf(&in.Prompt, true)
		if err != nil {
			if !errors.Is(err, errBadRequest) {
				t.Fatalf("prompt error is not a 400: %v", err)
			}
			return
		}
		if pr.ISL <= 0 {
			t.Fatalf("accepted isl %d", pr.ISL)
		}
		if !pr.HasTokens && len(pr.BlockHashes) != len(pr.SequenceHashes) {
			t.Fatalf("accepted %d block hashes with %d sequence hashes", len(pr.BlockHashes), len(pr.SequenceHashes))
		}
		if pr.HasTokens && (len(pr.Tokens) == 0 || int64(len(pr.Tokens)) != pr.ISL) {
			t.Fatalf("accepted %d tokens with isl %d", len(pr.Tokens), pr.ISL)
		}
	})
}

// FuzzDecodeWorker runs the decode and checks of a worker registration
// (POST /workers, and PATCH /workers/{id} alike) on arbitrary bytes: it
// either yields a record whose addresses are well formed or a 400, and
// never panics.
func FuzzDecodeWorker(f *testing.F) {
	// Seeds: testdata/fuzz/FuzzDecodeWorker.
	f.Fuzz(func(t *testing.T, body []byte) {
		var in api.WorkerFields
		if err := decodeJSON(body, &in); err != nil {
			if !errors.Is(err, errBadRequest) {
				t.Fatalf("decode error is not a 400: %v", err)
			}
			return
		}
		p, err := workerPatch(&in)
		if err != nil {
			if !errors.Is(err, errBadRequest) {
				t.Fatalf("patch error is not a 400: %v", err)
			}
			return
		}
		w := p.Apply(&fsm.Worker{WorkerID: 1, DataParallelSize: 1})
		if err := fsm.ValidateSpec(w); err != nil {
			if !errors.Is(err, fsm.ErrInvalidCommand) {
				t.Fatalf("spec error is not a 400: %v", err)
			}
			return
		}
		if w.Endpoint != "" {
			if err := api.CheckWorkerEndpoint(w.Endpoint); err != nil {
				t.Fatalf("accepted endpoint %q: %v", w.Endpoint, err)
			}
		}
		for rank, ep := range w.KVEventsEndpoints {
			if err := api.CheckZMQEndpoint(ep); err != nil {
				t.Fatalf("accepted kv events endpoint %q of rank %d: %v", ep, rank, err)
			}
		}
		if w.ReplayEndpoint != "" {
			if err := api.CheckZMQEndpoint(w.ReplayEndpoint); err != nil {
				t.Fatalf("accepted replay endpoint %q: %v", w.ReplayEndpoint, err)
			}
		}
	})
}
