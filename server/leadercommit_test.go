package server_test

import (
	"context"
	"testing"
	"time"

	"github.com/kvselect/kvselect/server/servertest"
)

// Test_LeaderCommitIndexAsksTheLeader: every node, leader and followers,
// learns the leader's own commit index (a follower over the leader's
// /cluster/status), at least what the leader had committed before.
func Test_LeaderCommitIndexAsksTheLeader(t *testing.T) {
	c := servertest.StartCluster(t, 3, nil)
	leader := c.WaitConverged()
	before := leader.Node.Status().CommitIndex
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, s := range c.Live() {
		got, err := s.Node.LeaderCommitIndex(ctx)
		if err != nil || got < before || got == 0 {
			t.Fatalf("%s: LeaderCommitIndex = %d, %v; want at least the leader's %d", s.Node.ID(), got, err, before)
		}
	}
}
