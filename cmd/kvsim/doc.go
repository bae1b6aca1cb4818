// Command kvsim runs simulated vLLM inference workers for kvselect demos,
// tests and benchmarks.
//
// Each worker binds a ZMQ PUB socket per data-parallel rank and a ZMQ
// ROUTER replay endpoint per rank (consecutive ports), speaks vLLM's KV
// event wire format (--encoding array or map) and keeps a bounded LRU
// block cache per rank, so prompts produce BlockStored, BlockRemoved and
// AllBlocksCleared events. At startup it prints one line per worker with
// its endpoints, then "control API on <URL>".
//
//	kvsim --workers 4 --dp-size 2 --register http://127.0.0.1:8092
//	kvsim --workers 8 --first-worker-id 21 --control 127.0.0.1:0 --register http://127.0.0.1:8092 \
//	      --trace testdata/traces/mooncake_synthetic_trace.jsonl --trace-select http://127.0.0.1:8092 --exit-after-trace
//
// --register posts every worker to a kvselect node (retrying while the node
// is not up), with a lease of --lease-ttl (10 s; 0: none) that kvsim
// renews in one batch keepalive a third of a TTL apart: once kvsim stops,
// the leases lapse and the cluster drops its workers. --trace replays a Mooncake trace through the workers, routed
// by --trace-select's /select or round-robin, and prints the replay
// statistics as one line. kvsim then keeps serving its workers and the
// control API until SIGINT or SIGTERM; with --exit-after-trace it exits
// with status 0 instead, as soon as that line is printed.
//
// The HTTP control API (--control, default 127.0.0.1:8093; port 0 binds a
// free port, which the startup line reports):
//
//	GET  /workers                                        registrations of every worker
//	GET  /workers/{id}                                   one worker's registration
//	POST /workers/{id}/prompt {"dp_rank"?, "token_ids"}  serve a prompt on that worker → {"blocks", "cached_blocks", "stored_blocks", "evicted_blocks"}
//	POST /prompt  {"worker_id", "dp_rank"?, "token_ids"} the same, naming the worker in the body
//	POST /reset   {"worker_id", "dp_rank"?}              AllBlocksCleared on one rank or every rank
//	POST /restart {"worker_id", "dp_rank"?}              simulated engine restart (silent cache loss, seq back to 0)
//
// Each worker registers <control API URL>/workers/{id} as its endpoint (the
// advertised host, and the port actually bound), so a caller that got the
// worker from kvselect's /select posts the prompt to endpoint + "/prompt".
// With --control "" nothing serves the workers over HTTP and the endpoint
// is the label kvsim://<advertise host>/workers/{id}.
//
// Errors are {"error": "..."} with 400 (bad body), 404 (unknown worker,
// rank or route) or 405 (wrong method, with Allow; a GET route also
// answers HEAD). Package kvsim defines the paths and bodies once, and
// kvsim.ControlClient calls them (the jepsen harness and kvbench soak do).
//
// Signals: SIGHUP resets every rank of every worker; SIGINT and SIGTERM
// shut down cleanly. Every flag can also be set through the environment
// variable KVSIM_<FLAG> (for example KVSIM_CACHE_BLOCKS); the command line
// wins.
package main
