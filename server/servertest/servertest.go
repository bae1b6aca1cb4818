package servertest

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"testing"
	"time"

	"github.com/kvselect/kvselect/cluster"
	"github.com/kvselect/kvselect/ingest"
	"github.com/kvselect/kvselect/scheduler"
	"github.com/kvselect/kvselect/server"
)

// Config returns a node configuration for in-process tests: loopback
// listeners on OS-chosen ports, data in dataDir, fast Raft timeouts, a
// seeded scheduler and a silent logger.
func Config(nodeID, dataDir string) server.Config {
	sc := scheduler.DefaultConfig()
	sc.Seed = 1
	return server.Config{
		HTTPAddr:  "127.0.0.1:0",
		Cluster:   cluster.TestConfig(nodeID, dataDir),
		Scheduler: sc,
		Logger:    testLogger(),
		// Reconnect fast: tests start engines after registering them.
		Ingest: ingest.Config{BackoffMin: 5 * time.Millisecond, BackoffMax: 100 * time.Millisecond},
	}
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
