package indexer

import (
	"fmt"

	"github.com/kvselect/kvselect/api"
	"github.com/kvselect/kvselect/fsm"
)

// Tier is the storage tier a worker holds a block on.
type Tier uint8

const (
	TierDevice Tier = iota // GPU memory
	TierHost               // host (pinned CPU) memory
	TierDisk               // local disk, remote or shared storage
	numTiers
)

// String returns the name used by /dump ("device", "host_pinned", "disk").
func (t Tier) String() string {
	switch t {
	case TierDevice:
		return api.TierDevice
	case TierHost:
		return api.TierHostPinned
	case TierDisk:
		return api.TierDisk
	}
	return fmt.Sprintf("tier(%d)", uint8(t))
}

// ParseTier is the inverse of Tier.String.
func ParseTier(s string) (Tier, error) {
	switch s {
	case api.TierDevice, "":
		return TierDevice, nil
	case api.TierHostPinned:
		return TierHost, nil
	case api.TierDisk:
		return TierDisk, nil
	}
	return 0, fmt.Errorf("unknown storage tier %q", s)
}

// RankKey names one data-parallel rank of one worker. Worker ids are
// unique across the catalog, so a RankKey is globally unique too.
type RankKey = fsm.RankKey

// EventKind tells the three KV cache events apart.
type EventKind uint8

const (
	EventStored EventKind = iota + 1
	EventRemoved
	EventCleared
)

func (k EventKind) String() string {
	switch k {
	case EventStored:
		return "stored"
	case EventRemoved:
		return "removed"
	case EventCleared:
		return "cleared"
	}
	return fmt.Sprintf("event(%d)", uint8(k))
}

// StoredBlock is one block of a stored event: the engine's opaque hash
// (used to resolve parents and later removals for this rank) and the local
// block hash computed from the block's tokens (the index key).
type StoredBlock struct {
	Hash  uint64
	Local uint64
}

// Event is a decoded KV cache event ready to apply. Blocks of a stored
// event form a chain: block i is the parent of block i+1.
type Event struct {
	Kind      EventKind
	Tier      Tier
	HasParent bool
	Parent    uint64        // engine hash of the first block's parent
	Blocks    []StoredBlock // EventStored
	Hashes    []uint64      // EventRemoved: engine hashes
}

// Outcome of applying one event, as counted in metrics.
type Outcome uint8

const (
	OutcomeOK Outcome = iota
	OutcomeParentNotFound
	OutcomeBlockNotFound
	OutcomeHashCollision
	OutcomeUnknownRank
	OutcomeInvalid
	numOutcomes
)

func (o Outcome) String() string {
	return [...]string{"ok", "parent_not_found", "block_not_found", "hash_collision", "unknown_rank", "invalid"}[o]
}

// ApplyStats counts what a batch did. Removals of blocks the rank does not
// hold count in BlocksNotFound but do not fail the event.
type ApplyStats struct {
	Events         [numOutcomes]int
	BlocksStored   int
	BlocksRemoved  int
	BlocksNotFound int
}

// Add accumulates other into s.
func (s *ApplyStats) Add(o ApplyStats) {
	for i := range s.Events {
		s.Events[i] += o.Events[i]
	}
	s.BlocksStored += o.BlocksStored
	s.BlocksRemoved += o.BlocksRemoved
	s.BlocksNotFound += o.BlocksNotFound
}
