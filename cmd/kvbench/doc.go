// Command kvbench drives and reports kvselect's benchmarks.
//
//	kvbench report -in go-bench.txt -out results.json
//
// report reads `go test -bench` output, prints one line per figure of SPEC
// §12 with its target and the baseline measured in the same run, and writes
// every metric as JSON. Later subcommands will generate load against
// running nodes.
package main
