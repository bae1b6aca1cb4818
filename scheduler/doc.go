// Package scheduler chooses a worker rank for a prompt and accounts for the
// load of the requests booked on this node (SPEC §6).
//
// Select scores every schedulable rank of the prompt's partition with the
// cost of SPEC §6.2: cached tokens from the indexer's match, weighted by
// tier, against active prefill tokens, active decode blocks and the prompt
// blocks not already in flight on the rank. Busy workers and ranks with a
// stale listener are dropped, and the request's policy (policy.go: the
// partition's from the catalog, else the cluster default, else
// Config.Policy) chooses among the rest, by default the cheapest (ties at
// random) or a sample by temperature; with Reserve the request is booked
// in the same critical section. Select allocates a fixed handful of
// values, never per rank (alloc_test.go pins the figure). Reserve books a rank chosen elsewhere (Ray's
// select-then-reserve); PrefillComplete, OutputBlock and Free follow the
// request's life; SweepExpired frees requests older than the expiry.
//
// Active prompt blocks shared by concurrent requests count once, and decay
// fractions weigh exactly the blocks a request holds alone; every lifecycle
// step is O(blocks of the request). Ranks follow the catalog through
// ApplyCatalog. MaxReservations and MaxReservedBlocks bound what a node
// holds (capacity.go).
//
// Replica sync: the scheduler owns its events (package scheduler/replica).
// It publishes its bookings' lifecycle through a Publisher (SetPublisher)
// and applies the other nodes' through ApplyPeerEvent, Forget and the
// anti-entropy of LiveBookings (antientropy.go); it knows no transport.
//
// Config starts from DefaultConfig (a zero weight or false switch is a
// setting, not a default); New refuses what Validate refuses. DESIGN.md
// has the details.
package scheduler
