// Package benchutil holds helpers shared by kvselect's benchmarks:
// ReportPercentiles turns latencies measured inside a benchmark loop into
// p50 and p99 metrics (indexer, scheduler, server), and load.go drives an
// HTTP load against a node, closed loop (ClosedLoop: a fixed number of
// connections, each sending as soon as it is answered) or open loop
// (OpenLoop: a fixed arrival rate, whatever the answers do), for the
// server's HTTP and replica-sync benchmarks.
package benchutil
