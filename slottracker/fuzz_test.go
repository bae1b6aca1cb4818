package slottracker

import (
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/kvselect/kvselect/api"
)

// FuzzDecodeRequest decodes arbitrary bytes as every request body of the
// API and, when a body decodes, runs it through the Service against a
// tracker with one registered worker. Decoding either yields every
// required field or a 400 naming one; the Service answers with a
// non-internal error or succeeds, never panics, and leaves no load behind.
func FuzzDecodeRequest(f *testing.F) {
	// Seeds: testdata/fuzz/FuzzDecodeRequest.
	svc, err := NewService(time.Minute, nil, slog.New(slog.DiscardHandler))
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(svc.Close)
	if err := svc.Register(Worker{WorkerID: 7, ModelName: "llama-3-8b", BlockSize: 16, DPSize: 2}); err != nil {
		f.Fatal(err)
	}
	const requestID = "req-123"
	if err := svc.Add(keyOf(ptr("llama-3-8b"), ""), requestID, 7, 0, []uint64{101, 1<<64 - 22}, 48); err != nil {
		f.Fatal(err)
	}

	f.Fuzz(func(t *testing.T, body []byte) {
		check := func(what string, err error) {
			t.Helper()
			if err != nil && codeOf(err) == api.CodeInternal {
				t.Fatalf("%s: internal error %v", what, err)
			}
		}
		decoded := func(v request) bool {
			t.Helper()
			err := decodeRequest(body, v)
			if err != nil && !errors.Is(err, ErrInvalid) {
				t.Fatalf("decode error is not a 400: %v", err)
			}
			return err == nil
		}

		var reg registerRequest
		if decoded(&reg) {
			w := Worker{WorkerID: *reg.WorkerID, ModelName: *reg.ModelName, TenantID: reg.TenantID,
				BlockSize: *reg.BlockSize, DPStart: *reg.DPStart, DPSize: *reg.DPSize}
			err := svc.Register(w)
			check("register", err)
			if err == nil {
				check("unregister", svc.Unregister(keyOf(reg.ModelName, reg.TenantID), w.WorkerID))
			}
		}
		var unreg unregisterRequest
		if decoded(&unreg) && *unreg.WorkerID != 7 {
			check("unregister", svc.Unregister(keyOf(unreg.ModelName, unreg.TenantID), *unreg.WorkerID))
		}
		var add addRequest
		if decoded(&add) && *add.RequestID != requestID {
			key := keyOf(add.ModelName, add.TenantID)
			err := svc.Add(key, *add.RequestID, *add.WorkerID, *add.DPRank, add.SequenceHashes, add.NewISLTokens)
			check("add", err)
			if err == nil {
				check("free", svc.Free(key, *add.RequestID))
			}
		}
		var lc lifecycleRequest
		if decoded(&lc) && *lc.RequestID != requestID {
			check("prefill_complete", svc.PrefillComplete(keyOf(lc.ModelName, lc.TenantID), *lc.RequestID))
			check("free", svc.Free(keyOf(lc.ModelName, lc.TenantID), *lc.RequestID))
		}
		var pl potentialLoadsRequest
		if decoded(&pl) {
			loads, err := svc.PotentialLoads(keyOf(pl.ModelName, pl.TenantID), pl.SequenceHashes, pl.NewISLTokens)
			check("potential_loads", err)
			for _, l := range loads {
				if l.PotentialPrefillTokens < pl.NewISLTokens || l.PotentialDecodeBlocks < 0 {
					t.Fatalf("projection %+v below the request's own load", l)
				}
			}
		}

		// Only the fixture's request is left, as it was booked.
		want := []Load{
			{ModelName: "llama-3-8b", TenantID: "default", WorkerID: 7, DPRank: 0, ActivePrefillTokens: 48, ActiveDecodeBlocks: 2},
			{ModelName: "llama-3-8b", TenantID: "default", WorkerID: 7, DPRank: 1},
		}
		if got := svc.Loads("llama-3-8b", "default"); len(got) != 2 || got[0] != want[0] || got[1] != want[1] {
			t.Fatalf("loads after the calls: %+v, want %+v", got, want)
		}
	})
}

func ptr[T any](v T) *T { return &v }
