// Package faultproxy is kvselect's one TCP fault proxy, for tests and the
// jepsen harness: a Link listens on a loopback port and forwards every
// connection to a target, and what it does to the bytes can change at any
// time — pass, blackhole (silence, as behind a dead switch), delay with
// jitter, drop connections at random (a flaky link), or Cut (reset at
// once, as a node that went away). A harness puts one Link on each
// directed link it wants to break (node i's Raft, HTTP or replica-sync
// connections to node j, a node's KV event connections to a worker) and
// points the dialer at it, by kvselect's --peer-dial and --kv-dial;
// raft's testing.go Partition is the spirit.
package faultproxy
