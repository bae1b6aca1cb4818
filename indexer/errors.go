package indexer

import "errors"

var (
	// ErrUnknownRank: events for a (worker, rank) the catalog does not hold
	// as schedulable are dropped.
	ErrUnknownRank = errors.New("unknown worker rank")
	// ErrUnknownPartition: no schedulable worker in that (model, tenant).
	ErrUnknownPartition = errors.New("unknown model/tenant partition")
	// ErrBadDump: a dump could not be loaded.
	ErrBadDump = errors.New("invalid index dump")
)
