// Package zmqsync will share active load between selector nodes by
// best-effort ZMQ PUB/SUB replica sync (SPEC §3.6): admissions,
// prefill completions and frees booked on one node are mirrored on the
// others, without sequencing, acknowledgement or replay.
//
// Not built yet: it arrives with the replica sync issue. Until then each
// node's active load covers only the reservations booked on that node.
package zmqsync
