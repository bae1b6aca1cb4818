// Command kvselect runs one node of the kvselect KV-cache-aware worker
// selection service. With no flags it runs a single-node cluster on :8092
// with its data in ./kvselect-data. Every flag can also be set through the
// environment variable KVSELECT_<FLAG> (for example KVSELECT_RAFT_ADDR);
// scheduling flags also fall back to Dynamo's DYN_* variables.
//
// Signals: SIGINT and SIGTERM shut the node down gracefully; SIGHUP reads
// --auth-token-file again and rotates the token (a bad file keeps the
// current one and is logged). A node removed from the cluster (kvselectctl
// cluster remove) logs why, answers /ready with 503, shuts down the same
// way and exits with status 0.
//
// `kvselect slot-tracker` runs Dynamo's standalone slot tracker API (seed
// 003) instead of a node: in memory, on :8091, with its own flags
// (package slottracker).
package main
