package server_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"testing"

	"github.com/kvselect/kvselect/api"
	"github.com/kvselect/kvselect/server"
	"github.com/kvselect/kvselect/server/servertest"
)

// readyz asks a node's GET /readyz.
func readyz(t *testing.T, s *server.Server) (int, api.Readyz) {
	t.Helper()
	r := call(t, "GET", s.URL()+api.PathReadyz, "")
	var body api.Readyz
	if err := json.Unmarshal([]byte(r.body), &body); err != nil {
		t.Fatalf("/readyz on %s: %v: %d %s", s.Node.ID(), err, r.status, r.body)
	}
	return r.status, body
}

// Test_FollowerReadyOnceCaughtUp: a node that restarts behind the others is
// not ready while it has no leader, and becomes ready only once it has
// applied every write the cluster acknowledged while it was down.
func Test_FollowerReadyOnceCaughtUp(t *testing.T) {
	c := servertest.StartCluster(t, 3, nil)
	for _, s := range c.Live() {
		servertest.Eventually(t, s.Node.ID()+" is ready", func() error {
			if status, body := readyz(t, s); status != http.StatusOK {
				return fmt.Errorf("%d %+v", status, body)
			}
			return nil
		})
	}

	lagging := c.Index(c.Followers()[0])
	c.Stop(lagging)
	var last uint64
	for id := 1; id <= 10; id++ {
		last = mustUpsert(t, c.Leader().URL(), id)
	}
	// The lagging node comes back alone: a member without a leader.
	var others []int
	for i := range c.Nodes {
		if i != lagging {
			others = append(others, i)
			c.Stop(i)
		}
	}
	back := c.Restart(lagging)
	status, body := readyz(t, back)
	if status != http.StatusServiceUnavailable || body.Reason != api.ReadyzNoLeader || !body.Member ||
		body.Suffrage != api.SuffrageVoter || body.Code != api.CodeNotReady {
		t.Fatalf("the lagging node alone: %d %+v, want 503 no_leader as a voter", status, body)
	}

	// A node with the whole log comes back and wins the election (the
	// lagging node's log is behind, so it cannot). The lagging node is
	// ready once it has caught up, and never before.
	c.Restart(others[0])
	servertest.Eventually(t, "the lagging node is ready", func() error {
		status, body := readyz(t, back)
		if status != http.StatusOK {
			return fmt.Errorf("%d %s: %s", status, body.Reason, body.Error)
		}
		if body.AppliedIndex < last || body.CommitIndex < last || body.Leader == "" {
			t.Fatalf("ready before catching up with the write at %d: %+v", last, body)
		}
		return nil
	})
	servertest.Eventually(t, "the lagging node's catalog has every write", func() error {
		if got := len(workerIDs(t, back)); got != 10 {
			return fmt.Errorf("%d workers", got)
		}
		return nil
	})
}
