package server

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"testing"

	"github.com/kvselect/kvselect/api"
)

// fakeCatchUp is a follower's status and the leader's answer, as a test
// sets them.
type fakeCatchUp struct {
	mu           sync.Mutex
	st           api.ClusterStatus
	leaderCommit uint64
	err          error
}

func (f *fakeCatchUp) status() api.ClusterStatus { f.mu.Lock(); defer f.mu.Unlock(); return f.st }
func (f *fakeCatchUp) ask(context.Context) (uint64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.leaderCommit, f.err
}

// applied sets the follower's log end, commit and applied index to i, as
// after a batch of appends: hashicorp/raft caps a follower's commit index
// at the end of its log, so its own status shows it caught up.
func (f *fakeCatchUp) applied(i uint64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.st.CommitIndex, f.st.AppliedIndex, f.st.CatalogIndex = i, i, i
}

// Test_CatchUpLatchWaitsForTheLeadersCommit: a follower catching up in
// batches has applied its own commit index after every batch; the latch
// must not set until it has applied the leader's. It used to set after
// the first batch, for good.
func Test_CatchUpLatchWaitsForTheLeadersCommit(t *testing.T) {
	f := &fakeCatchUp{st: api.ClusterStatus{NodeID: "n2", State: api.StateFollower, Leader: api.LeaderRef{ID: "n1"}},
		err: errors.New("leader unreachable")}
	s := &Server{log: slog.New(slog.DiscardHandler), statusOf: f.status, askLeaderCommit: f.ask}

	f.applied(100) // the first batch: the follower's own status says caught up
	s.learnLeaderCommit(context.Background())
	if s.CaughtUp() {
		t.Fatal("latched after a batch without ever learning the leader's commit index")
	}
	f.mu.Lock()
	f.leaderCommit, f.err = 500, nil
	f.mu.Unlock()
	s.learnLeaderCommit(context.Background())
	for _, batch := range []uint64{200, 300, 499} {
		f.applied(batch)
		if s.CaughtUp() {
			t.Fatalf("latched at applied index %d, its own commit index, with the leader's at 500", batch)
		}
	}
	f.mu.Lock()
	f.err = errors.New("leader unreachable") // a failed question keeps what was learned
	f.mu.Unlock()
	s.learnLeaderCommit(context.Background())
	f.applied(500)
	if !s.CaughtUp() {
		t.Fatal("not latched with the leader's commit index applied")
	}
	f.applied(501)
	f.mu.Lock()
	f.st.Leader.ID = "" // the leader is gone: the latch stays
	f.mu.Unlock()
	if !s.CaughtUp() {
		t.Fatal("the latch did not stay set")
	}
}
