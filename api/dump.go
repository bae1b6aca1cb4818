package api

import (
	"strconv"
	"strings"
)

// The index dump (GET /dump, SPEC §7) is the Dynamo standalone indexer's
// recovery format, a list of RouterEvents per partition with parents
// before children, plus per-rank sequence watermarks, so a recovering node
// can load it and replay the rest from each worker's replay endpoint.
//
// Keys. Partitions are keyed "<model>:<tenant>", as Dynamo keys them. That
// key is ambiguous when names hold ':' (model "x:y" with tenant "z" and
// model "x" with tenant "y:z" both give "x:y:z"), so every entry also
// carries its model_name and tenant_id, and loaders trust those over the
// key. A writer makes colliding keys unique with DumpKeys: the partition
// first in (model, tenant) order keeps the plain key, the others get
// "#2", "#3", ... appended. A dump without model_name and tenant_id (Dynamo's
// standalone indexer writes none) is read by SplitDumpKey, which cuts the
// key at its first ':'; for a model name with ':' in it that guess names
// another partition, which the loader then does not know and skips.
//
// Order. kvselect writes model_name, tenant_id and block_size before
// events, so that a loader can apply events as they stream in; a loader
// needs block_size (and model_name and tenant_id, when present) before
// the events of an entry.

// Dump is GET /dump: partitions keyed by "<model>:<tenant>" (see DumpKeys).
type Dump map[string]*PartitionDump

// PartitionDump is one partition's snapshot, taken atomically with its
// watermarks.
type PartitionDump struct {
	// ModelName and TenantID name the partition; loaders trust them over
	// the key. Absent in Dynamo's dumps; a loader takes "" as absent.
	ModelName  string        `json:"model_name"`
	TenantID   string        `json:"tenant_id"`
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

// Content negotiation of GET /dump: a client that sends
// "Accept-Encoding: gzip" gets the dump gzip-compressed, with
// "Content-Encoding: gzip".
const (
	HeaderAcceptEncoding  = "Accept-Encoding"
	HeaderContentEncoding = "Content-Encoding"
	EncodingGzip          = "gzip"
)

// DumpKey is the plain key of a partition: "<model>:<tenant>".
func DumpKey(model, tenant string) string { return model + ":" + tenant }

// DumpKeys returns the key of each partition, given in (model, tenant)
// order: DumpKey, made unique. The first partition with a key keeps it;
// a later one whose key is taken gets "#n" appended, with the smallest n
// ≥ 2 that no other partition's key uses. Dynamo's loaders, which split
// keys at the first ':', therefore still find the partition whose model
// has no ':' under its plain key.
func DumpKeys(parts [][2]string) []string {
	taken := make(map[string]bool, len(parts))
	for _, p := range parts {
		taken[DumpKey(p[0], p[1])] = false // plain keys: reserved, not yet used
	}
	out := make([]string, len(parts))
	for i, p := range parts {
		k := DumpKey(p[0], p[1])
		if used := taken[k]; used {
			base := k
			for n := 2; ; n++ {
				k = base + "#" + strconv.Itoa(n)
				if _, clash := taken[k]; !clash {
					break
				}
			}
		}
		taken[k] = true
		out[i] = k
	}
	return out
}

// SplitDumpKey guesses a partition from a key alone, as Dynamo's format
// requires: the model is everything before the first ':', the tenant the
// rest; a key without ':' is a model with the default tenant. The guess is
// wrong for model names that contain ':' (use model_name and tenant_id
// when the entry has them).
func SplitDumpKey(key string) (model, tenant string) {
	model, tenant, ok := strings.Cut(key, ":")
	if !ok {
		return key, DefaultScope
	}
	return model, tenant
}
