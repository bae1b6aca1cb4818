// Command kvbench drives and reports kvselect's benchmarks.
//
//	kvbench report -in go-bench.txt -out results.json
//	kvbench soak -duration 10m -bin bin -out bench/results/soak.json
//	kvbench routing -trace testdata/traces/mooncake_synthetic_trace.jsonl -out bench/results/routing.json -svg bench/results/routing.svg
//	kvbench routing-sweep -speeds 2,4,6,8,12 -fleets uniform,hetero -out bench/results/routing-sweep.json
//	kvbench trace-gen -pattern sessions -requests 4000 -seed 1 -out sessions.jsonl
//
// report reads `go test -bench` output, prints one line per figure of SPEC
// §12 with its target and the baseline measured in the same run, and writes
// every metric as JSON. A missed target is reported as missed; report
// fails only on input it cannot read.
//
// soak is SPEC §12's "flat memory under a 10-minute churn run": it starts
// three kvselect nodes (a cluster with replica sync) and kvsim workers
// from the built binaries, runs mixed traffic on every node (selections,
// bookings and their lifecycle reported to other nodes, catalog churn
// through different nodes, kvsim process and engine restarts), samples
// each node's RSS, Go heap and goroutines, and fails unless they end flat,
// errors stay under a small ratio and every node's load returns to zero.
// Every child process is stopped when it ends, Ctrl-C included.
//
// routing is SPEC §12's routing quality: a Mooncake trace (or part of
// one: -offset, -every, -limit) replayed through kvsim's timed engines
// (kvsim.TimedReplay, virtual time) by every strategy on identical fleets
// and arrivals: kvselect (three in-process nodes with the shipped default
// policy and replica sync, booking with /select_and_reserve round-robin
// over the nodes as Ray's replicas would, prefill_complete and free to
// the next node), kvselect with replica sync off, the same nodes with
// each other compared policy (dynamo-default, two-tier, agentic,
// predicted-ttft, less the default), round-robin, random, least-loaded
// (the engines' true queues) and greedy-prefix (a heuristic that sees
// every cache, not a bound). In virtual time the nodes' schedulers run on
// the replay's clock. It prints one table with the trace's
// infinite-cache hit rate and SPEC §12's targets, writes JSON and draws
// the TTFT CDF and hit rates (gonum/plot, SVG or PNG). It exits non-zero
// when an invariant fails (a request lost, an error, load left on an
// engine or a node), and with -gate when a target is missed.
//
// routing-sweep runs routing at several speeds on a uniform and a mixed
// fleet (a quarter of the engines half as fast), with the nodes' busy
// threshold set, and reports TTFT p90, E2E p99 and goodput (requests
// served within a TTFT bound, 503s counted as misses) per strategy
// against offered load: a table per point, JSON and an SVG.
//
// trace-gen writes synthetic Mooncake traces with other sharing patterns
// (kvsim.GenerateTrace: tenants, sessions, near-random), for runs on
// traces a policy was not tuned on.
package main
