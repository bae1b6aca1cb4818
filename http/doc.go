// Package http is kvselect's HTTP API (SPEC §3): the worker catalog,
// health, selection, reservations, inspection, the index dump, metrics and
// cluster administration.
//
// All routes are declared in one table (Service.routes). Handlers are
// thin: they decode and validate the request, call the cluster, scheduler
// or indexer, and encode the answer. They return errors instead of writing
// them; statusOf (errors.go) is the one place that maps an error to an HTTP
// status and a machine-readable code, and every error body is
// {"error": "...", "code": "..."}.
//
// Bad input is answered with 400 and a message that starts with the
// offending field: malformed JSON, wrong types, missing required fields,
// out-of-range values, mismatched hash list lengths. Bodies are limited to
// 8 MiB (413) and hash or token lists to 2^20 entries. Unknown routes are a
// JSON 404 and wrong methods a JSON 405.
//
// Importers conventionally name this package httpd to keep net/http's name.
package http
