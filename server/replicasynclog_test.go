package server_test

import (
	"log/slog"
	"strings"
	"testing"

	"github.com/kvselect/kvselect/internal/testlog"
	"github.com/kvselect/kvselect/server"
	"github.com/kvselect/kvselect/server/servertest"
)

// Test_RestartLogsReplicaSyncOnce: a node that started alone and was
// joined restarts with two members in its Raft state and no flag that
// says so. Start turns replica sync on from that state, and its log must
// say so once: it used to say "replica sync on" and then "replica sync
// off", the second from a switch case that fell through to its default.
func Test_RestartLogsReplicaSyncOnce(t *testing.T) {
	c := servertest.StartCluster(t, 1, withAutoReplicaSync)
	c.Add(c.Nodes[0].URL())
	c.WaitConverged()
	c.Stop(0)
	var logs testlog.Buffer
	s := c.RestartWith(0, func(cfg *server.Config) {
		cfg.Logger = logs.Logger(slog.LevelInfo)
	})
	if s.Sync() == nil {
		t.Fatal("the restarted node runs without replica sync, with two members in its Raft state")
	}
	out := logs.String() // Start has logged its replica-sync line by the time it returns
	if on, off := strings.Count(out, `msg="replica sync on"`), strings.Count(out, `msg="replica sync off"`); on != 1 || off != 0 {
		t.Fatalf("the restart logged %d \"replica sync on\" and %d \"replica sync off\" lines, want 1 and 0:\n%s", on, off, out)
	}
}
