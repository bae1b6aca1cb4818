// Package api is kvselect's HTTP API as it appears on the wire: the paths
// and query parameters of every route, the request and answer bodies, the
// headers of leader routing and session consistency, the machine-readable
// error codes with their HTTP statuses, and the limits and identifier rules
// that both ends check (SPEC §3).
//
// It is the one place these facts are written down. The server (package
// http, and the cluster's own inter-node calls), the Go client (package
// client), kvselectctl and kvsim all import it; the OpenAPI document it
// embeds (openapi.json, served at GET /openapi.json) describes the same
// API for everyone else, and a test keeps the two in agreement.
//
// The package has no dependency on the server's parts, so a caller can use
// it without pulling in Raft, ZMQ or the index.
//
// Conventions of the bodies:
//
//   - Request fields whose absence must be told from their zero value are
//     pointers (a patch's fields, worker_id where 0 is a valid id,
//     optional numbers with a meaningful 0); Ptr makes one.
//   - Hashes and token ids have their own types (Hashes, TokenIDs): hashes
//     may be sent signed or unsigned and are decoded without reflection,
//     since a prompt can carry a million of them.
//   - Answers carry every field SPEC names; optional ones are omitted when
//     absent, never sent as null.
package api
