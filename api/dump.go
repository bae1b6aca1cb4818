package api

// The index dump (GET /dump, SPEC §7) is the Dynamo standalone indexer's
// recovery format, a list of RouterEvents per partition with parents
// before children, plus per-rank sequence watermarks, so a recovering node
// can load it and replay the rest from each worker's replay endpoint.

// Dump is GET /dump: partitions keyed by "<model>:<tenant>".
type Dump map[string]*PartitionDump

// PartitionDump is one partition's snapshot, taken atomically with its
// watermarks.
type PartitionDump struct {
	BlockSize  uint32        `json:"block_size"`
	Events     []RouterEvent `json:"events"`
	Watermarks []Watermark   `json:"watermarks"`
}

// Storage tiers of a RouterEvent.
const (
	TierDevice     = "device"
	TierHostPinned = "host_pinned"
	TierDisk       = "disk"
)

// RouterEvent is one stored event of one worker rank.
type RouterEvent struct {
	WorkerID    uint64       `json:"worker_id"`
	StorageTier string       `json:"storage_tier"`
	Event       KVCacheEvent `json:"event"`
}

// KVCacheEvent carries the event id, rank and data of a RouterEvent.
type KVCacheEvent struct {
	EventID uint64    `json:"event_id"`
	DPRank  uint32    `json:"dp_rank"`
	Data    EventData `json:"data"`
}

// EventData is the externally tagged event payload; dumps only hold
// stored events.
type EventData struct {
	Stored *StoredData `json:"stored,omitempty"`
}

// StoredData is a chain of blocks under ParentHash (nil: at the root).
type StoredData struct {
	ParentHash *uint64     `json:"parent_hash"`
	Blocks     []DumpBlock `json:"blocks"`
}

// DumpBlock pairs the engine's block hash with the local tokens hash.
type DumpBlock struct {
	BlockHash  uint64 `json:"block_hash"`
	TokensHash uint64 `json:"tokens_hash"`
}

// Watermark is the last sequence number applied for a rank.
type Watermark struct {
	WorkerID uint64 `json:"worker_id"`
	DPRank   uint32 `json:"dp_rank"`
	Seq      uint64 `json:"seq"`
}
