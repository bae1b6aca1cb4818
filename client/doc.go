// Package client is the Go client of kvselect's HTTP API: a typed call for
// every route, with the behaviour SPEC §2 asks of a client library.
//
//   - Node affinity. Selection, bookings and their lifecycle go to one node
//     (the first of Config.Addrs that answers): a reservation lives on the
//     node that booked it. When that node cannot be reached at all (the
//     connection was never made, so nothing was sent), the client moves to
//     the next address.
//   - Leader following. Catalog and membership writes go to the same node,
//     which forwards them to the leader and answers once it has applied
//     the write itself. When that node answers that nothing was written
//     (not_leader, no_leader, shutting_down) or cannot be reached, the
//     client finds the leader through /cluster/status and sends the write
//     there, retrying with backoff for up to Config.RetryTimeout
//     (WithRetryNotify tells the caller about each retry).
//   - Retries only where they are safe. A request is sent again when it
//     provably did nothing (no connection, or one of the codes above); a
//     read, also when its answer was lost. A catalog write whose outcome
//     is unknown (unknown_outcome, or a lost answer) is retried because
//     catalog writes are idempotent upserts and deletes; a DELETE that
//     then finds the worker gone reports it (Error.AfterUnknownOutcome).
//     Bookings and lifecycle calls are never resent once sent, and a step
//     down is not idempotent, so neither is retried after an unknown
//     outcome.
//   - Session consistency. The client remembers the highest catalog index
//     any answer carried (X-Kvselect-Index) and sends it with every
//     selection and catalog read, so it always reads its own writes, on
//     any node; CatalogIndex and ObserveCatalogIndex share it between
//     clients (a Ray driver and its tasks, say).
//
// Config.Token is sent as a bearer token on every request (the selection
// token opens what a Ray caller does; catalog writes need the admin
// token). A cluster that serves HTTPS takes https addresses, and
// Config.CAFile when its CA is its own; a leader named by host:port is
// reached in the scheme of the node that named it.
//
// Every call takes a context, which bounds it, retries included. Errors
// from a node are *Error values carrying the API's code (package api);
// CodeOf extracts it.
package client
