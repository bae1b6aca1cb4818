// Package promx holds the Prometheus metrics that more than one kvselect
// process exports, under the same names and labels (SPEC §10): HTTP
// requests and latency by route (kvselect_http_requests_total,
// kvselect_http_request_duration_seconds) and the running build
// (kvselect_build_info). The node (packages http and server) and the slot
// tracker (package slottracker) both use it, so one dashboard reads
// either.
package promx
