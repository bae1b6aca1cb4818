// Package proccluster runs clusters of real kvselect processes (and kvsim
// processes) on loopback for the process tests of cmd/kvselect, the
// kvbench soak and the jepsen harness: one launcher where there were
// three, in the spirit of etcd's tests/framework/e2e.
//
// A node's command line is a NodeOptions, turned into arguments by
// NodeOptions.Args alone and checked against kvselect's own flag
// definitions (nodeflags.Check) before any process starts, so a harness
// cannot drift from the flags kvselect parses. Start reserves loopback
// ports, optionally puts a faultproxy.Link on every directed inter-node
// link (raft, http, replica sync; named by --peer-dial) and on every
// node's connections to each worker rank (--kv-dial), and starts the
// processes with their logs in Config.Dir. The Cluster then kills
// (SIGKILL), stops (SIGTERM), pauses and resumes (SIGSTOP/SIGCONT) and
// restarts nodes; partitions, one-way cuts, latency and flaky links are
// settings of the links (raft's testing.go Partition, over real sockets).
// Every wait (WaitLeader, WaitHealthy, Sim.WaitWorkers) goes through
// internal/poll and fails at once when a process exits on its own.
//
// StartSim runs a kvsim process and hands back its typed control client
// (kvsim.ControlClient) and its workers' registrations; WorkerAddrs turns
// them into the addresses the nodes' KV links carry, and Register upserts
// them through the leader.
//
// Ownership: the Cluster owns its processes and links, Close stops them
// all and waits; every child also dies with the harness (Pdeathsig).
package proccluster
