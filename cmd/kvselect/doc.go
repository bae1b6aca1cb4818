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
// Command line: "kvselect help" (or -h, --help) prints the flags, each
// with its environment variables, on stdout; "kvselect help slot-tracker"
// the slot tracker's. The flags for test harnesses (--peer-dial,
// --kv-dial: fault injection, see package jepsen) are parsed like the
// others but listed only by --help-all. A wrong command line (an unknown
// flag or command, a bad flag value) is one line on stderr that names it
// and the nearest flags ("kvselect: unknown flag --prot (did you mean
// --port?); run kvselect --help for the flags"), exit status 2; a node
// that cannot start exits 1.
//
// `kvselect slot-tracker` runs Dynamo's standalone slot tracker API (seed
// 003) instead of a node: in memory, on :8091, with its own flags
// (package slottracker).
package main
