package indexer

import "errors"

var (
	// ErrUnknownRank: events for a (worker, rank) the catalog does not hold
	// as schedulable are dropped.
	ErrUnknownRank = errors.New("unknown worker rank")
	// ErrUnknownPartition: no schedulable worker in that (model, tenant).
	ErrUnknownPartition = errors.New("unknown model/tenant partition")
	// ErrMalformedBatch: a KV event payload that cannot be decoded as a
	// batch; the whole message is dropped and counted.
	ErrMalformedBatch = errors.New("malformed KV event batch")
	// ErrBadDump: a dump could not be loaded.
	ErrBadDump = errors.New("invalid index dump")
)
