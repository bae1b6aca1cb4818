// Package fsm holds kvselect's worker catalog as a deterministic Raft state
// machine.
//
// The catalog is the only state kvselect replicates through Raft: inference
// workers (with their endpoints, data-parallel ranks and block size) keyed by
// worker id, grouped into partitions by (model_name, tenant_id). Every node
// applies the same commands in the same order and so holds an identical
// catalog, including the derived lifecycle of each worker (schedulable or
// incomplete, with reasons), which is a pure function of the catalog.
//
// Design rules, after consul's agent/consul/fsm:
//
//   - A command is one type byte followed by a JSON payload; Apply dispatches
//     on the type through a table. An unknown type or an undecodable payload
//     is a fatal error (panic): silently skipping it would let nodes diverge.
//   - No I/O, no clocks, no randomness. Record timestamps are Raft log indexes
//     (create_index, modify_index).
//   - State is an immutable *Catalog replaced wholesale by every Apply, so
//     Snapshot only grabs the current pointer and readers never lock.
//   - Restore decodes a snapshot into a brand-new Catalog and swaps it in.
//
// Side effects of catalog changes (ZMQ listeners, index partitions, active
// load) happen outside the FSM: the cluster package watches Changed and diffs
// successive catalogs with Diff.
package fsm
