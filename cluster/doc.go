// Package cluster runs kvselect's Raft node: hashicorp/raft with
// raft-boltdb/v2 (log and stable store) and a file snapshot store in the
// data dir, over a TCP transport. While the node holds an admin token,
// every Raft connection is authenticated both ways with it before raft
// sees a byte (raftauth.go; DESIGN.md, "Raft authentication").
//
// The package owns three things:
//
//   - Writes. Apply encodes a catalog command and replicates it through the
//     leader. Errors distinguish a write that certainly did not happen
//     (ErrNotLeader, ErrNoLeader) from one whose fate is unknown
//     (ErrUnknownOutcome); the FSM's own verdicts (fsm.ErrWorkerNotFound)
//     pass through. A successful Apply returns only after this node's side
//     effects of the write are done, so the node that took a write serves
//     reads that see it.
//   - Reads. Catalog is the local FSM state; LinearizableCatalog runs the
//     leader read-index protocol; WaitApplied gives read-your-writes to
//     clients that carry a catalog index.
//   - Side effects. A watcher goroutine diffs successive catalogs into one
//     fsm.Change and hands it to the node's observer (which applies it to
//     the indexer, scheduler and listeners, in order) outside the FSM,
//     level-triggered, so the FSM stays pure and raft is never blocked.
//
// Leadership and heartbeat health are followed with a non-blocking raft
// observer; a peer's outage is logged once when it starts and once when
// it ends, from the outcome of the RPCs raft sends it, instead of raft's
// error per failed RPC. A data dir without raft state is bootstrapped as a
// one-voter cluster; Join, Remove and StepDown change membership on the
// leader. Removed is closed once this node is out of the committed
// configuration, so that its owner shuts it down. Beside these it keeps
// the node's metadata in the catalog (meta.go: HTTP and replica-sync
// addresses, incarnation), worker leases on the leader (lease.go) and the
// cluster id and epochs replica sync binds its messages to (identity.go).
//
// Config starts from DefaultConfig (TestConfig for in-process tests): its
// timings have no zero default. Open fills Logger and SnapshotsRetained
// when zero and refuses what Validate refuses.
package cluster
