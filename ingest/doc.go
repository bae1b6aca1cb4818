// Package ingest feeds the indexer from the workers' KV event streams
// (SPEC §4). The Manager is a catalog observer: for every rank of every
// schedulable worker it runs a listener with a ZMQ SUB socket on the
// rank's kv_events endpoint and a reconnect loop with backoff
// (backoff.Loop). A listener is a thin I/O shell (listener.go: sockets,
// the bounded queue, replay requests, metrics, status) around a
// socket-free sequence tracker (tracker.go: in-order apply, gaps and
// their replay, duplicates, engine restarts), and hands each decoded
// payload to the index in one call (indexer.ApplyWire). It reports a
// status per rank for /workers and /ready. See DESIGN.md.
package ingest
