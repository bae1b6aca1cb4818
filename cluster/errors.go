package cluster

import "errors"

var (
	// ErrNotLeader: the operation must run on the leader and this node is
	// not it. Nothing was written.
	ErrNotLeader = errors.New("not the leader")
	// ErrNoLeader: no leader is known (election in progress or no quorum).
	ErrNoLeader = errors.New("no leader")
	// ErrUnknownOutcome: a write was handed to raft but its fate is unknown
	// (leadership lost, shutdown, deadline): it may or may not commit.
	// Catalog writes are idempotent; clients retry.
	ErrUnknownOutcome = errors.New("write outcome unknown")
	// ErrCatalogBehind: this node has not applied the requested index in
	// time.
	ErrCatalogBehind = errors.New("catalog behind requested index")
	// ErrMembership: a join, remove or step-down request is not possible.
	ErrMembership = errors.New("membership change rejected")
	// ErrNoLease: a keepalive named a worker registered without a lease.
	ErrNoLease = errors.New("worker has no lease")
	// ErrDataDirInUse: another process holds the data dir's Raft store
	// (a node still running with the same --data-dir).
	ErrDataDirInUse = errors.New("data dir in use")
	// ErrInvalidConfig: Config.Validate refused the configuration.
	ErrInvalidConfig = errors.New("invalid cluster configuration")
	// ErrClosed: the node is shut down.
	ErrClosed = errors.New("node closed")
)
