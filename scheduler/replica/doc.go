// Package replica holds the scheduler's replica-sync vocabulary: the
// lifecycle events of a booking (admission, prefill completion, free) that
// a node publishes to the other nodes and applies from them, and the
// anti-entropy parts (live sets, wants) that repair lost ones.
//
// The scheduler owns these types: it builds the events it publishes
// (through its Publisher) and decides what a peer's event does to its
// mirrored load (Scheduler.ApplyPeerEvent). zmqsync is one transport for
// them: it encodes, orders, authenticates and delivers them, and imports
// this package; neither the scheduler nor this package knows zmqsync.
package replica
