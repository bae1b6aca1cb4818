// Command kvbench drives and reports kvselect's benchmarks.
//
//	kvbench report -in go-bench.txt -out results.json
//	kvbench soak -duration 10m -bin bin -out bench/results/soak.json
//
// report reads `go test -bench` output, prints one line per figure of SPEC
// §12 with its target and the baseline measured in the same run, and writes
// every metric as JSON.
//
// soak is SPEC §12's "flat memory under a 10-minute churn run": it starts
// three kvselect nodes (a cluster with replica sync) and kvsim workers
// from the built binaries, runs mixed traffic on every node (selections,
// bookings and their lifecycle reported to other nodes, catalog churn
// through different nodes, kvsim process and engine restarts), samples
// each node's RSS, Go heap and goroutines, and fails unless they end flat,
// errors stay under a small ratio and every node's load returns to zero.
// Every child process is stopped when it ends, Ctrl-C included.
package main
