// Package jepsen is the fault-injection harness of SPEC §13: it runs real
// kvselect processes and a kvsim fleet, and breaks them the way
// production breaks.
//
// A Cluster (cluster.go) starts N kvselect nodes on loopback with their
// own data dirs and log files. Every directed inter-node connection goes
// through its own Link (proxy.go), a TCP proxy whose fault changes at
// run time: blackhole, delay with jitter, or drop. Node i reaches node j
// only through the three links i->j (Raft, HTTP forwarding, replica
// sync), named on i's command line with --peer-dial, and each kvsim
// worker's KV event and replay endpoints only through its own links
// (workers.go), named with --kv-dial; clients talk to the nodes directly. Partitions, one-way partitions, latency and flaky links
// are settings of those links; kill (SIGKILL), stop (SIGTERM), pause
// (SIGSTOP/SIGCONT) and restart act on the processes.
//
// A Nemesis (nemesis.go) is one such fault with Inject and Heal, in the
// manner of etcd's robustness failpoints; Heal leaves every process
// running, every link passing and the cluster healthy. The cluster
// records each inject and heal as a NemesisEvent on a time base shared
// with the workload's history.
//
// The workload (workload.go) runs concurrent catalog clients over a few
// worker ids (register, patch, delete, linearizable get, each on a random
// node, recorded in a History with call and return times and classified
// ok, fail or unknown) and a selection client per node
// (select_and_reserve, then prefill_complete and free on random nodes),
// while kvsim's workers serve prompts that keep KV events flowing.
// The checkers (checker.go) run porcupine per worker id, look for lost
// acknowledged writes in the final catalog, and check that the nodes
// converge on the catalog, the index (full /overlap_scores rows for the
// workload's prompts and those nemeses served) and zero load. Run (runner.go) ties one nemesis to all of it on a fresh cluster
// and writes history.jsonl, nemesis.jsonl, history.html and summary.json
// (report.go).
package jepsen
