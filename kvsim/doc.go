// Package kvsim simulates vLLM inference workers for demos, tests and
// benchmarks of kvselect. It never runs a model: a "prompt" only moves KV
// blocks in and out of a per-rank cache, and every change is published the
// way vLLM's ZmqEventPublisher publishes it.
//
// Each worker has DPSize data-parallel ranks. Each rank owns
//
//   - a block cache of CacheBlocks blocks with least-recently-used
//     eviction, keyed by engine block hashes (chained XXH3 with a seed of
//     its own, deliberately unlike kvselect's local hashes);
//   - a ZMQ PUB socket publishing 3-frame messages [topic, seq (8 bytes,
//     big-endian), msgpack payload], the payload being the batch
//     [ts, events, data_parallel_rank] with events in the array or map
//     encoding (BlockStored, BlockRemoved, AllBlocksCleared);
//   - a replay buffer of the last ReplayBuffer messages, served by a ZMQ
//     ROUTER: a DEALER sends ["", start_seq] and receives every buffered
//     message with seq >= start_seq, then a message with seq ff×8. The
//     ROUTERs of one worker bind consecutive ports, because vLLM derives
//     rank r's replay endpoint from rank 0's by adding r to the port.
//
// Worker.Serve, Reset, Restart and SkipLive drive a rank the way a real
// engine would behave, including the failures a subscriber must handle
// (lost messages, engine restarts). Start's Registration values are the
// bodies kvselect's POST /workers expects, and Sim.Register posts them;
// with Config.LeaseTTL they carry a lease, which Sim.KeepLeases renews
// through any member of the cluster.
// ReadTrace, TraceTokens and ReplayTrace replay a Mooncake trace through
// the workers, either round-robin or as chosen by kvselect's /select.
//
// TimedReplay replays a trace in time: each rank runs a timed engine model
// (EngineConfig: a token budget per step, a cap on running requests, a
// waiting queue, a prefill cost per uncached token and a decode cost per
// output token), requests arrive at their timestamps on a virtual clock
// (or the wall clock), and a Router chooses each request's engine:
// RoundRobin, Random, LeastLoaded, a GreedyPrefix that knows every cache, or
// KvselectRouter, which books through kvselect nodes the way Ray does.
// Figures summarises a run (hit rate, TTFT and end-to-end percentiles,
// throughput, load imbalance, 503 rate), Goodput the requests served
// within a TTFT bound, and InfiniteCacheHitRate bounds the hit rate any
// router can reach on a trace. A VirtualClock lets kvselect nodes run on
// the replay's virtual time. GenerateTrace writes synthetic traces with
// other sharing patterns (tenants, sessions, near-random) for runs on
// traces a router was not tuned on.
//
// The command cmd/kvsim wraps this package with flags, an HTTP control API
// and signal handling. The control API's paths and bodies are defined
// here (control.go), with ControlClient, the one client of it that test
// harnesses and tools use. DESIGN.md explains the invariants.
package kvsim
