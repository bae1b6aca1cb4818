// Package fsm holds kvselect's worker catalog as a deterministic Raft state
// machine.
//
// The catalog is the only state kvselect replicates through Raft: inference
// workers (with their endpoints, data-parallel ranks, block size and
// optional lease) keyed by worker id, grouped into partitions by
// (model_name, tenant_id); the selector nodes' metadata (with each node's
// epoch, which grows at every start of the node); the cluster id
// (clusterid.go); the selection policy of each partition and of the
// cluster (policy.go); each model's busy thresholds of load shedding
// (thresholds.go); and the partitions that lost their last worker
// (known.go: what tells a misspelt model from an outage). Every node
// applies the same commands in the same order and so holds an identical
// catalog, including what is derived from it: each worker's lifecycle
// (schedulable or incomplete, with reasons), each partition's block size
// (sticky: kept while any worker holds it, once the catalog rules are on:
// rules.go), schedulable workers and ranks.
// These views are computed once per change, when the catalog is built, so
// the indexer, the scheduler and the listeners read the same answer.
//
// Design rules, after consul's agent/consul/fsm:
//
//   - A command (Command) is one type byte followed by its payload; Apply
//     dispatches on the type through a table whose handlers all have one
//     shape. An unknown type or an undecodable payload is a fatal error
//     (panic): skipping it would let nodes diverge, unless the newer binary
//     that wrote it flagged the type IgnoreUnknown (a command an older
//     node can do without), in which case it is skipped and counted.
//   - The log format is its own (logformat.go): versioned payload and
//     snapshot types, never the API's structs, pinned by golden files of
//     entries and snapshots that every later release must still decode.
//   - No I/O, no clocks, no randomness. Record timestamps are Raft log indexes
//     (create_index, modify_index).
//   - State is an immutable *Catalog replaced wholesale by every Apply, so
//     Snapshot only grabs the current pointer and readers never lock.
//   - Restore decodes a snapshot into a brand-new Catalog and swaps it in.
//
// Side effects of catalog changes (ZMQ listeners, index partitions, active
// load) happen outside the FSM: the cluster package watches Changed, diffs
// successive catalogs into one Change (NewChange) and hands it to the node's
// Observer.
package fsm
