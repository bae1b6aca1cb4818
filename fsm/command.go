package fsm

import (
	"encoding/json"
	"fmt"
)

// CommandType is the first byte of every Raft log entry kvselect writes.
// Values are part of the on-disk format: never renumber, only append.
type CommandType uint8

const (
	// CmdUpsertWorker inserts or replaces a worker record.
	CmdUpsertWorker CommandType = 1
	// CmdPatchWorker updates the supplied fields of an existing worker.
	CmdPatchWorker CommandType = 2
	// CmdDeleteWorker removes a worker.
	CmdDeleteWorker CommandType = 3
	// CmdSetNode inserts or replaces a selector node's metadata.
	CmdSetNode CommandType = 4
	// CmdDeleteNode removes a selector node's metadata.
	CmdDeleteNode CommandType = 5
	// 6 and up are reserved for busy thresholds.
)

func (t CommandType) String() string {
	switch t {
	case CmdUpsertWorker:
		return "upsert_worker"
	case CmdPatchWorker:
		return "patch_worker"
	case CmdDeleteWorker:
		return "delete_worker"
	case CmdSetNode:
		return "set_node"
	case CmdDeleteNode:
		return "delete_node"
	}
	return fmt.Sprintf("command(%d)", uint8(t))
}

// UpsertWorker is the payload of CmdUpsertWorker. Derived fields of Worker
// (lifecycle, indexes) are ignored.
type UpsertWorker struct {
	Worker Worker `json:"worker"`
}

// PatchWorker is the payload of CmdPatchWorker.
type PatchWorker struct {
	WorkerID uint64      `json:"worker_id"`
	Patch    WorkerPatch `json:"patch"`
}

// WorkerPatch holds the fields a PATCH supplied; nil means "keep". For the
// optional fields an empty string or 0 clears the value.
type WorkerPatch struct {
	ModelName             *string            `json:"model_name,omitempty"`
	TenantID              *string            `json:"tenant_id,omitempty"`
	Endpoint              *string            `json:"endpoint,omitempty"`
	BlockSize             *uint32            `json:"block_size,omitempty"`
	DataParallelStartRank *uint32            `json:"data_parallel_start_rank,omitempty"`
	DataParallelSize      *uint32            `json:"data_parallel_size,omitempty"`
	KVEventsEndpoints     *map[uint32]string `json:"kv_events_endpoints,omitempty"`
	// KVEventsEndpoint replaces the endpoint map with a single entry for
	// the (possibly patched) start rank.
	KVEventsEndpoint    *string `json:"kv_events_endpoint,omitempty"`
	ReplayEndpoint      *string `json:"replay_endpoint,omitempty"`
	TotalKVBlocks       *uint64 `json:"total_kv_blocks,omitempty"`
	MaxNumBatchedTokens *uint64 `json:"max_num_batched_tokens,omitempty"`
}

// Apply returns a patched copy of w with defaults filled; w itself is not
// modified. The HTTP layer uses it to validate a patch before it is
// replicated.
func (p *WorkerPatch) Apply(w *Worker) *Worker {
	c := w.clone()
	setIf(&c.ModelName, p.ModelName)
	setIf(&c.TenantID, p.TenantID)
	setIf(&c.Endpoint, p.Endpoint)
	setIf(&c.BlockSize, p.BlockSize)
	setIf(&c.DataParallelStartRank, p.DataParallelStartRank)
	setIf(&c.DataParallelSize, p.DataParallelSize)
	setIf(&c.ReplayEndpoint, p.ReplayEndpoint)
	setIf(&c.TotalKVBlocks, p.TotalKVBlocks)
	setIf(&c.MaxNumBatchedTokens, p.MaxNumBatchedTokens)
	if p.KVEventsEndpoints != nil {
		c.KVEventsEndpoints = make(map[uint32]string, len(*p.KVEventsEndpoints))
		for k, v := range *p.KVEventsEndpoints {
			c.KVEventsEndpoints[k] = v
		}
	}
	if p.KVEventsEndpoint != nil {
		c.KVEventsEndpoints = map[uint32]string{c.DataParallelStartRank: *p.KVEventsEndpoint}
	}
	c.normalize()
	return c
}

func setIf[T any](dst *T, src *T) {
	if src != nil {
		*dst = *src
	}
}

// DeleteWorker is the payload of CmdDeleteWorker.
type DeleteWorker struct {
	WorkerID uint64 `json:"worker_id"`
}

// EncodeCommand renders a log entry: the type byte then the JSON payload.
func EncodeCommand(t CommandType, payload any) ([]byte, error) {
	body, err := json.Marshal(payload)
	if err != nil {
		return nil, fmt.Errorf("encode %s: %w", t, err)
	}
	return append([]byte{byte(t)}, body...), nil
}
