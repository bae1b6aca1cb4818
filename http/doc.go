// Package http is kvselect's HTTP API (SPEC §3): the worker catalog,
// health, selection, reservations, inspection, the index dump, metrics,
// busy thresholds and selection policies, cluster administration and the
// OpenAPI document.
//
// The wire itself (paths, bodies, headers, codes) is package api; this
// package serves it. All routes are declared in one table (routes.go).
// Handlers are thin: they decode and validate the request into api types,
// call the node's parts through narrow interfaces (interfaces.go: catalog
// reader and writer, leadership, leases, cluster admin, selector, load,
// index, recovery and catch-up readers, replica sync), and encode the
// answer. Tests replace those parts with fakes to
// inject unknown_outcome, catalog_behind or a leader change without Raft.
// Handlers return errors instead of writing them; errorCodes (errors.go)
// is the one table from errors to api codes, and api.Code.Status gives the
// HTTP status. Every error body is {"error": "...", "code": "..."}.
//
// Bad input is answered with 400 and a message that starts with the
// offending field: malformed JSON, wrong types, unknown fields, missing
// required fields, out-of-range values, invalid ids, mismatched hash list
// lengths. Bodies are limited to api.MaxBodyBytes, 8 MiB (413), and hash
// or token lists to api.MaxHashes, 2^20 entries. Paths with dot or empty segments are a 400, never cleaned
// or redirected. Unknown routes are a JSON 404; wrong methods a JSON 405
// with Allow; HEAD works wherever GET does.
//
// Authentication (access.go, SPEC §11): every route names an access class
// (api.AccessOpen ... api.AccessAdmin); one table gives, per class and
// --auth-scope, whose bearer token it takes: none, the selection or the
// admin token, or the admin token alone (the selection token there is
// 403 forbidden). Both token files' lines are accepted. A follower
// forwards as itself, with its own admin token.
//
// Readiness routes answer three questions (SPEC §3.2). GET /ready: can
// this node select, that is, is a worker schedulable here? GET /readyz
// (readyz.go, rqlite's name), for operators and scripts: is this node a
// voter that knows a leader and has applied up to the commit index it
// learned from it? GET /readyz?for=selection, the pod readiness probe:
// has this node caught up with a leader once since it started, and
// recovered its index? That one stays true without a leader (the node's
// latch, server/readiness.go), since selection needs no quorum. All are
// open like /health, since a probe carries no token, and their 503 is an
// answer, not a logged failure.
//
// Every request is logged at DEBUG; a 5xx that is a failure is also a
// WARN with its error, the first of its code in a minute only
// (faillog.go: the repeats stay at DEBUG and are counted, and the count is
// reported when the minute is over). A 503 that is the node's ordinary
// answer is not a failure: /ready without a schedulable worker or on a
// node removed from the cluster, and not_ready while the node cannot
// serve yet.
//
// Leader-only routes (catalog and membership writes, linearizable reads)
// are forwarded by followers to the leader (forward.go). A forwarded
// write's answer is relayed once this node has applied the write itself,
// so a client reads its write on the node it wrote through.
//
// Importers conventionally name this package httpd to keep net/http's name.
package http
