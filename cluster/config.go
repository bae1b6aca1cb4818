package cluster

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"time"
)

// Config configures one Raft node. Start from DefaultConfig.
type Config struct {
	// NodeID is the node's stable Raft server id.
	NodeID string
	// DataDir holds raft.db (log and stable store) and snapshots/.
	DataDir string
	// RaftBind is the TCP address the Raft transport listens on; port 0
	// picks a free port (tests).
	RaftBind string
	// RaftAdvertise is the address other nodes dial; empty means the bound
	// address. It must never be an unspecified address (0.0.0.0).
	RaftAdvertise string
	// HTTPAdvertise is this node's HTTP address as others should use it;
	// reported in /cluster/status.
	HTTPAdvertise string

	// Raft timing. The defaults suit three processes on one loaded machine.
	HeartbeatTimeout   time.Duration
	ElectionTimeout    time.Duration
	LeaderLeaseTimeout time.Duration
	CommitTimeout      time.Duration

	// SnapshotThreshold is how many log entries trigger a snapshot;
	// SnapshotInterval how often raft checks; TrailingLogs how many entries
	// stay after a snapshot for slow followers.
	SnapshotThreshold uint64
	SnapshotInterval  time.Duration
	TrailingLogs      uint64
	SnapshotsRetained int

	// ApplyTimeout bounds how long a write waits to be enqueued.
	ApplyTimeout time.Duration
	// LeaderWait is how long a write or linearizable read waits for a
	// leader to be elected before failing with ErrNoLeader, so that a
	// client does not see an election as an error.
	LeaderWait time.Duration
	// BoltOpenTimeout bounds waiting for the raft.db file lock (another
	// process holding the data dir).
	BoltOpenTimeout time.Duration

	Logger *slog.Logger
}

// DefaultConfig returns production defaults for the given node.
func DefaultConfig() Config {
	return Config{
		HeartbeatTimeout:   1000 * time.Millisecond,
		ElectionTimeout:    1000 * time.Millisecond,
		LeaderLeaseTimeout: 500 * time.Millisecond,
		CommitTimeout:      50 * time.Millisecond,
		SnapshotThreshold:  8192,
		SnapshotInterval:   30 * time.Second,
		TrailingLogs:       10240,
		SnapshotsRetained:  2,
		ApplyTimeout:       5 * time.Second,
		LeaderWait:         5 * time.Second,
		BoltOpenTimeout:    5 * time.Second,
	}
}

// Validate checks the configuration and fills derived defaults.
func (c *Config) Validate() error {
	var errs []error
	if c.NodeID == "" {
		errs = append(errs, errors.New("node id is required"))
	}
	if c.DataDir == "" {
		errs = append(errs, errors.New("data dir is required"))
	}
	if _, _, err := net.SplitHostPort(c.RaftBind); err != nil {
		errs = append(errs, fmt.Errorf("raft bind address %q: %w", c.RaftBind, err))
	}
	if c.RaftAdvertise != "" {
		if err := CheckAdvertise(c.RaftAdvertise); err != nil {
			errs = append(errs, fmt.Errorf("raft advertise address: %w", err))
		}
	}
	if c.HeartbeatTimeout <= 0 || c.ElectionTimeout <= 0 || c.LeaderLeaseTimeout <= 0 || c.CommitTimeout <= 0 {
		errs = append(errs, errors.New("raft timeouts must be positive"))
	}
	if c.LeaderLeaseTimeout > c.HeartbeatTimeout {
		errs = append(errs, errors.New("leader lease timeout must not exceed the heartbeat timeout"))
	}
	if c.ApplyTimeout <= 0 || c.BoltOpenTimeout <= 0 {
		errs = append(errs, errors.New("apply and bolt open timeouts must be positive"))
	}
	if c.SnapshotsRetained < 1 {
		c.SnapshotsRetained = 1
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return errors.Join(errs...)
}

// CheckAdvertise rejects addresses other nodes cannot dial: no host, an
// unspecified host (0.0.0.0, ::) or port 0.
func CheckAdvertise(addr string) error {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("%q: %w", addr, err)
	}
	if host == "" {
		return fmt.Errorf("%q has no host", addr)
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
		return fmt.Errorf("%q is an unspecified address; advertise one other nodes can reach", addr)
	}
	if port == "0" {
		return fmt.Errorf("%q has port 0", addr)
	}
	return nil
}
