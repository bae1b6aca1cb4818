// Package indexer keeps, for every (model, tenant) partition, which worker
// ranks hold which KV cache blocks, and answers how many leading blocks of a
// prompt each rank holds on device, host and disk.
//
// Blocks are identified by local block hashes computed from their tokens
// (BlockHashes, SequenceHashes; SPEC §6.1). KV events arrive from the
// engines' ZMQ streams (package ingest) as vLLM payloads: WireDecoder
// decodes one, and Indexer.ApplyWire applies the decoded batch in one call
// — it computes the local hashes, checks the block size against the
// partition's under its lock, and moves the stream's watermark.
// Indexer.Apply takes events already converted (tests, benchmarks, an
// engine-restart reset); the engine's own hashes only resolve parents and
// removals for that rank. Ranks exist in the index exactly while their
// worker is schedulable in the catalog (Indexer.ApplyCatalog).
//
// Indexer.Match is the hot path: a prefix tree whose nodes are keyed by
// the sequence hash of their path in one open-addressing table per
// partition (byKey), so a query jumps to any depth directly; with exact
// per-rank hole counts, ranks holding a prefix-closed set are scored by
// bisection over depth rather than by walking every block. Match (given
// room in out), WireDecoder.Decode and ApplyWire allocate nothing once
// warm; testing.AllocsPerRun guards pin it.
//
// WriteDump and LoadDump (dumpload.go) stream the Dynamo RouterEvent
// recovery format with per-rank watermarks (GET /dump, startup
// recovery), one partition snapshot or one batch of events at a time.
// DESIGN.md explains the data structure, its invariants and its measured
// costs.
package indexer
