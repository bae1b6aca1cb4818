// Package ingest feeds the indexer from the workers' KV event streams
// (SPEC §4). The Manager is a catalog observer: for every rank of every
// schedulable worker it runs a listener with a ZMQ SUB socket on the
// rank's kv_events endpoint, its own reconnect loop with backoff, and
// per-listener sequence tracking — in-order apply, gap recovery through
// the worker's replay endpoint, engine-restart detection — reporting a
// status per rank for /workers and /ready. See DESIGN.md.
package ingest
