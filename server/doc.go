// Package server assembles one kvselect node from its parts: the Raft
// node and catalog (cluster, fsm), the prefix index (indexer), selection
// and load accounting (scheduler) and the HTTP API (http). It owns the
// construction order, the goroutines that run beside the parts, and a
// graceful shutdown. cmd/kvselect only turns flags into a Config; tests
// build whole nodes in-process with the same code.
package server
