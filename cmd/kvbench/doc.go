// Command kvbench drives and reports kvselect's benchmarks.
//
//	kvbench report -in go-bench.txt -out results.json
//	kvbench soak -duration 10m -bin bin -out bench/results/soak.json
//	kvbench routing -trace ../shared/traces/mooncake_synthetic_trace.jsonl -out bench/results/routing.json -svg bench/results/routing.svg
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
// routing is SPEC §12's routing quality: a Mooncake trace replayed through
// kvsim's timed engines (kvsim.TimedReplay, virtual time) by every
// strategy on identical fleets and arrivals: kvselect (three in-process
// nodes with replica sync, booking with /select_and_reserve round-robin
// over the nodes as Ray's replicas would, prefill_complete and free to
// the next node), kvselect with replica sync off, round-robin, random,
// least-loaded and greedy-prefix (a heuristic that sees every cache, not a
// bound). It prints one table with the targets, writes JSON and draws the TTFT CDF and hit rates (gonum/plot, SVG or
// PNG). It exits non-zero when an invariant fails (a request lost, an
// error, load left on an engine or a node), never for a timing.
package main
