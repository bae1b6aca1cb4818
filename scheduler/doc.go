// Package scheduler chooses a worker rank for a prompt and accounts for the
// load of the requests booked on this node (SPEC §6).
//
// Select scores every schedulable rank of the prompt's partition with the
// cost of SPEC §6.2: cached tokens from the indexer's match, weighted by
// tier, against active prefill tokens, active decode blocks and the prompt
// blocks not already in flight on the rank. It picks the cheapest (ties at
// random) or samples by temperature, and with Reserve books the request in
// the same critical section. Reserve books a rank chosen elsewhere (Ray's
// select-then-reserve); PrefillComplete, OutputBlock and Free follow the
// request's life; SweepExpired frees requests older than the expiry.
//
// Active prompt blocks shared by concurrent requests count once, and decay
// fractions weigh exactly the blocks a request holds alone; every lifecycle
// step is O(blocks of the request). Ranks follow the catalog through
// ApplyCatalog. DESIGN.md has the details.
package scheduler
