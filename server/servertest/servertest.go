package servertest

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"testing"
	"time"

	"github.com/kvselect/kvselect/server"
	"github.com/kvselect/kvselect/server/localcluster"
)

// Config returns a node configuration for in-process tests
// (localcluster.NodeConfig: loopback listeners on OS-chosen ports, data in
// dataDir, fast Raft timeouts, a seeded scheduler) with the test logger,
// silent unless KVSELECT_TEST_LOG is set.
func Config(nodeID, dataDir string) server.Config {
	cfg := localcluster.NodeConfig(nodeID, dataDir)
	cfg.Logger = testLogger()
	return cfg
}

// MustStart starts a node for a test, waits until it leads its cluster and
// stops it when the test ends.
func MustStart(t testing.TB, cfg server.Config) *server.Server {
	t.Helper()
	s, err := server.Start(cfg)
	if err != nil {
		t.Fatalf("start node: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := s.Close(ctx); err != nil {
			t.Errorf("close node: %v", err)
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := s.Node.WaitForLeader(ctx); err != nil {
		t.Fatalf("no leader: %v", err)
	}
	// Selection-ready too: until it has caught up with its own commit
	// index as leader, a node answers not_ready where a test may expect
	// unknown_partition.
	Eventually(t, "the node catches up with its leader", func() error {
		if !s.CaughtUp() {
			return errors.New("not caught up yet")
		}
		return nil
	})
	return s
}

func testLogger() *slog.Logger {
	if os.Getenv("KVSELECT_TEST_LOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.DiscardHandler)
}
