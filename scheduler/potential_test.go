package scheduler

import (
	"errors"
	"testing"
)

// Test_ProjectLoads checks that the projection counts what booking the
// request would add: prefill tokens as given, and the request's distinct
// hashes not active on the rank, wherever they sit in the prompt.
func Test_ProjectLoads(t *testing.T) {
	f := newFixture(t)
	f.worker(1, 2)
	tokens := func(n int64) *int64 { return &n }
	book := func(id string, rank uint32, prefill int64, seq ...uint64) {
		t.Helper()
		_, err := f.s.Reserve(ReserveRequest{ID: id, Partition: keyM, WorkerID: 1, DPRank: rank,
			Prompt: Prompt{SequenceHashes: seq, ISL: max(prefill, 1)}, EffectivePrefill: tokens(prefill)})
		if err != nil {
			t.Fatal(err)
		}
	}
	book("a", 0, 48, 101, 102, 103)
	book("b", 0, 16, 101, 102) // a shared prefix: still 3 active blocks

	for _, tt := range []struct {
		name      string
		seq       []uint64
		newTokens int64
		// rank 0 then rank 1
		prefill [2]int64
		decode  [2]float64
	}{
		{"shared prefix counts once", []uint64{101, 102, 103, 104}, 48, [2]int64{112, 48}, [2]float64{4, 4}},
		{"active hash outside the prefix", []uint64{999, 103}, 0, [2]int64{64, 0}, [2]float64{4, 2}},
		{"repeated hash counts once", []uint64{7, 7, 7}, 5, [2]int64{69, 5}, [2]float64{4, 1}},
		{"empty request", nil, 0, [2]int64{64, 0}, [2]float64{3, 0}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, err := f.s.ProjectLoads(keyM, tt.seq, tt.newTokens)
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != 2 {
				t.Fatalf("got %d ranks, want 2: %+v", len(got), got)
			}
			for i, pl := range got {
				if pl.WorkerID != 1 || pl.DPRank != uint32(i) || pl.PrefillTokens != tt.prefill[i] || pl.DecodeBlocks != tt.decode[i] {
					t.Errorf("rank %d: got %+v, want prefill %d decode %v", i, pl, tt.prefill[i], tt.decode[i])
				}
			}
		})
	}

	if _, err := f.s.ProjectLoads(keyM, nil, -1); !errors.Is(err, ErrInvalid) {
		t.Errorf("negative tokens: %v, want ErrInvalid", err)
	}
	if _, err := f.s.ProjectLoads(keyM, nil, MaxISLTokens+1); !errors.Is(err, ErrInvalid) {
		t.Errorf("too many tokens: %v, want ErrInvalid", err)
	}
	other := keyM
	other.Tenant = "other"
	if _, err := f.s.ProjectLoads(other, nil, 0); !errors.Is(err, ErrNotReady) {
		t.Errorf("unknown partition: %v, want ErrNotReady", err)
	}
}
