package scheduler

import (
	"errors"
	"testing"

	"github.com/kvselect/kvselect/indexer"
)

// Test_StaleRanksAreNotSelected: a stale rank loses to any other, even
// holding the whole prompt; with every rank stale the partition is not
// ready here; once fresh it wins again. A rank created while stale is
// judged stale from the start, and a stale rank keeps its bookings.
func Test_StaleRanksAreNotSelected(t *testing.T) {
	f := newFixture(t)
	f.worker(1, 1)
	f.worker(2, 1)
	f.cache(1, 0, indexer.TierDevice, 0, 1, 2, 3, 4)
	pr := prompt(1, 2, 3, 4)
	f.mustReserve("kept", 1, 0, prompt(9))
	stale := func(keys ...indexer.RankKey) map[indexer.RankKey]struct{} {
		m := map[indexer.RankKey]struct{}{}
		for _, k := range keys {
			m[k] = struct{}{}
		}
		return m
	}
	w1, w2, w3 := indexer.RankKey{Worker: 1}, indexer.RankKey{Worker: 2}, indexer.RankKey{Worker: 3}
	steps := []struct {
		name    string
		stale   map[indexer.RankKey]struct{}
		add     uint64 // a worker registered after SetStale
		want    uint64
		wantErr error
	}{
		{"fresh: the cache wins", nil, 0, 1, nil},
		{"worker 1 stale", stale(w1), 0, 2, nil},
		{"every rank stale", stale(w1, w2), 0, 0, ErrNotReady},
		{"a worker registered while stale stays unselected", stale(w1, w2, w3), 3, 0, ErrNotReady},
		{"fresh again", nil, 0, 1, nil},
	}
	for _, st := range steps {
		f.s.SetStale(st.stale)
		if st.add != 0 {
			f.worker(st.add, 1)
		}
		sel, err := f.s.Select(SelectRequest{Partition: keyM, Prompt: pr})
		if !errors.Is(err, st.wantErr) || (err == nil && sel.WorkerID != st.want) {
			t.Fatalf("%s: selected %+v, %v; want worker %d, %v", st.name, sel, err, st.want, st.wantErr)
		}
		if l := f.load(1, 0); l.ActiveRequests != 1 {
			t.Fatalf("%s: worker 1's booking went: %+v", st.name, l)
		}
	}
}
