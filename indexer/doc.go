// Package indexer keeps, for every (model, tenant) partition, which worker
// ranks hold which KV cache blocks, and answers how many leading blocks of a
// prompt each rank holds on device, host and disk.
//
// Blocks are identified by local block hashes computed from their tokens
// (BlockHashes, SequenceHashes; SPEC §6.1). KV events arrive through
// Indexer.Apply as batches of stored, removed and cleared events per rank
// (the ZMQ listeners that decode them from engines come next); the engine's
// own hashes only resolve parents and removals for that rank. Ranks exist
// in the index exactly while their worker is schedulable in the catalog
// (Indexer.ApplyCatalog).
//
// Indexer.Match is the hot path: a prefix tree stored as one flat map keyed
// by path hash, with exact per-rank hole counts, so that ranks holding a
// prefix-closed set are scored by bisection over depth rather than by
// walking every block. WriteDump and LoadDump stream the Dynamo RouterEvent
// recovery format with per-rank watermarks (GET /dump, startup recovery),
// one partition snapshot or one batch of events at a time. DESIGN.md
// explains the data structure, its invariants and its measured costs.
package indexer
