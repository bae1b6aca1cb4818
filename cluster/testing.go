package cluster

import (
	"log/slog"
	"time"
)

// TestConfig returns a configuration for an in-process node on loopback
// with an OS-chosen raft port and timeouts short enough for tests but long
// enough for a loaded two-core machine running the race detector.
func TestConfig(nodeID, dataDir string) Config {
	c := DefaultConfig()
	c.NodeID = nodeID
	c.DataDir = dataDir
	c.RaftBind = "127.0.0.1:0"
	c.HeartbeatTimeout = 200 * time.Millisecond
	c.ElectionTimeout = 200 * time.Millisecond
	c.LeaderLeaseTimeout = 100 * time.Millisecond
	c.CommitTimeout = 5 * time.Millisecond
	c.Logger = slog.New(slog.DiscardHandler)
	return c
}
