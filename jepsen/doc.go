// Package jepsen is the fault-injection harness of SPEC §13: it runs real
// kvselect processes and a kvsim fleet, breaks them the way production
// breaks, and judges the outcome as a gate, not a report.
//
// A Cluster (cluster.go) is a proccluster.Cluster, the process harness
// the process tests and the soak share, set up for faults: it starts N
// kvselect nodes on loopback with their own data dirs and log files, every one with an admin token
// (--auth-token-file, --auth-scope all: every route but /health, /ready,
// /readyz and /openapi.json needs it, and it keys the replica-sync MAC),
// an active-request expiry of an hour (LoadExpiry) and
// --raft-trailing-logs Config.TrailingLogs. Every request the harness
// makes carries the token (auth.go), so forwarding, replica sync and
// index recovery run authenticated under the faults. Every directed
// inter-node connection goes through its own Link (package faultproxy),
// a TCP proxy whose fault changes at run time: blackhole, delay with
// jitter, or drop.
// Node i reaches node j only through the three links i->j (Raft, HTTP
// forwarding, replica sync), named on i's command line with --peer-dial,
// and each kvsim worker's KV event and replay endpoints only through its
// own links (workers.go; kvsim is driven through kvsim.ControlClient),
// named with --kv-dial; clients talk to the nodes
// directly. Partitions, one-way partitions, latency and flaky links are
// settings of those links; kill (SIGKILL), stop (SIGTERM), pause
// (SIGSTOP/SIGCONT) and restart act on the processes.
//
// A Nemesis (nemesis.go, membership.go) is one such fault with Inject and
// Heal, in the manner of etcd's robustness failpoints; Heal leaves every
// process running, every link passing and the cluster healthy. A nemesis
// that claims an effect proves it: snapshot-catch-up waits until the
// leader's log no longer reaches the isolated follower and its heal finds
// "Installed remote snapshot" in the follower's log; worker-link-cut
// checks that the victim counted the engine restart before the cut and
// not the one during it; member-remove-rejoin checks that the removed node exits with status 0
// and comes back as a voter. The cluster records each inject and heal as
// a NemesisEvent on a time base shared with the workload's history, with
// the nodes an inject takes down on purpose.
//
// The workload (workload.go, leases.go, thresholds.go) runs, on random
// nodes: catalog clients over a few worker ids (register, patch, delete,
// linearizable get; recorded in a History with call and return times and
// classified ok, fail or unknown, each ok answer's body kept); a
// selection client per node (select_and_reserve on its node, then
// prefill_complete and free on random nodes); lease clients (workers
// registered with lease_ttl_s, renewed by keepalives, then left to
// lapse); and a threshold client that sets and clears busy thresholds of
// the kvsim workers' model, and under a tight one books holds on one node
// until every rank is busy and probes that a further selection there is
// shed. kvsim's workers serve prompts that keep KV events flowing. Every
// scenario also removes a follower and adds it back while the clients
// run (a membership change).
//
// The checkers (checker.go, leases.go, thresholds.go, bookings.go) run
// porcupine per worker id and on the thresholds, against a model that
// checks every ok answer exactly (each field of the record, its Raft
// indexes); look for lost acknowledged writes in the final catalog; check
// that no lease was lost while an acknowledged renewal covered it and
// that every lease lapses after the run; explain every busy answer by a
// tight threshold that could be in force; and, once healed and once the
// harness has freed the bookings whose free it could not confirm
// (SweepBookings), check that the nodes converge on the catalog (with
// thresholds) and the index (full /overlap_scores rows for the
// workload's prompts and those nemeses served), and that every node's
// load is zero within LoadsZeroBound: a free replica sync lost shows as
// load that stays, and ExplainLeft says where its free was acknowledged.
//
// The verdict (report.go, bounds.go) passes a run only if every check ran
// and held, no node the nemesis did not take down went longer than the
// nemesis's bound (SelectionGapBound) without a successful selection or
// failed more than MaxLiveSelectFailRatio of its selections, and the run
// did a minimum of work (Min*). Run (runner.go) ties one nemesis to all
// of it on a fresh cluster and writes history.jsonl, nemesis.jsonl,
// history.html and summary.json.
package jepsen
