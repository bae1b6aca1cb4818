// Package slottracker serves Dynamo's standalone slot tracker API (seed
// 003, SPEC §9) on kvselect's own active-load accounting: consumers
// register worker ranks by hand, report each request's life (/add,
// /prefill_complete, /free) and read advisory loads (/loads,
// /potential_loads) for routing decisions of their own. `kvselect
// slot-tracker` runs it (cmd/kvselect/slottracker.go).
//
// # One scheduler per tracker
//
// A tracker is one (model_name, tenant_id). Each holds its own worker
// catalog (an fsm.Log: the catalog state machine applied locally, without
// Raft) and its own scheduler.Scheduler, which follows that catalog
// through ApplyCatalog exactly as a kvselect node's does. The scheduler
// does all the accounting: /add is scheduler.Reserve with the request's
// new_isl_tokens as its effective prefill, /prefill_complete and /free are
// PrefillComplete and Free, /loads is Loads, /potential_loads is
// ProjectLoads, and the expiry sweep is the scheduler's (RunSweeper, one
// per tracker). Nothing here counts blocks or tokens.
//
// Separate catalogs and schedulers scope what the seed scopes by tracker:
// the catalog keys workers by id and the scheduler keys requests by id,
// both per process, while the slot tracker lets the same worker_id and the
// same request_id live in two trackers. A tracker is created by its first
// /register and dropped, with its scheduler and sweeper, when its last
// worker unregisters; until then /free of an unknown request is a no-op,
// afterwards it is a 404 like any call naming an unknown tracker.
//
// The catalog calls a worker schedulable only with an endpoint and a KV
// events endpoint for each rank. Slot tracker workers have neither (no
// listener runs in this mode, and the scheduler's index is always empty),
// so registration fills both with placeholders that nothing ever dials;
// the catalog's own limits and checks apply unchanged (block_size at most
// 65536, dp_size at most 4096, ranks below 2^20, 65535 ranks per tracker).
//
// # Choices where the seed is silent
//
//   - A /register whose block_size differs from its tracker's, or that
//     names a worker_id already registered there, is a 409: the request is
//     well formed but conflicts with the tracker's state (as in Dynamo).
//   - model_name is required; tenant_id defaults to "default" (so does an
//     empty one). Unknown JSON fields and unknown query parameters are a
//     400 naming them, as everywhere in kvselect.
//   - Hashes may be signed or unsigned 64-bit integers (−22 and 2^64−22
//     are the same block); at most 2^20 per request.
//   - Errors carry kvselect's machine-readable "code" next to "error".
//   - Routes are http.ServeMux "METHOD /path" patterns (http.go): paths
//     match exactly, HEAD is served wherever GET is, an unknown path is a
//     JSON 404 and a known path with another method a JSON 405 with
//     Allow.
//
// # Metrics
//
// GET /metrics (not part of seed 003) serves, under the node's metric
// names (SPEC §10): kvselect_http_requests_total and
// kvselect_http_request_duration_seconds by route and status (internal/
// promx, shared with the node; unknown paths count as route
// "unmatched"), kvselect_active_requests, kvselect_active_prefill_tokens
// and kvselect_active_decode_blocks per tracked rank with the tracker's
// model_name and tenant_id as labels (scheduler.LoadCollector over every
// tracker's scheduler), kvselect_build_info, and the Go runtime and
// process collectors.
//
// Locking: Service.mu guards the tracker map and serialises catalog writes
// (register, unregister); lifecycle calls and reads only look a tracker up
// under it and then rely on the scheduler's own locks.
package slottracker
