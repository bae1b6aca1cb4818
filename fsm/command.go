package fsm

import "fmt"

// CommandType is the first byte of every Raft log entry kvselect writes.
// Values are part of the on-disk format: never renumber, only append.
//
// The high bit (IgnoreUnknown) marks an entry that a binary which does not
// know its type may skip without diverging: one whose effect a node can do
// without (consul's IgnoreUnknownTypeFlag). A rolling upgrade that adds
// such a command does not stop older followers. An unknown type without
// the flag stays fatal: skipping it would let the catalog diverge.
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
	// CmdSetThresholds sets some of a model's busy thresholds.
	CmdSetThresholds CommandType = 6
	// CmdClearThresholds unsets a model's busy thresholds.
	CmdClearThresholds CommandType = 7
	// CmdInitThresholds sets a model's initial busy thresholds unless it
	// has a record already.
	CmdInitThresholds CommandType = 8
	// CmdExpireLease removes a worker whose lease lapsed, unless the
	// record changed since the leader judged it (SPEC §3.7).
	CmdExpireLease CommandType = 9
	// CmdSetClusterID gives the catalog its cluster id unless it has one
	// (written with the IgnoreUnknown flag).
	CmdSetClusterID CommandType = 10
	// CmdSetPolicy stores a partition's selection policy, or the cluster
	// default (written with the IgnoreUnknown flag, as are the next two).
	CmdSetPolicy CommandType = 11
	// CmdDeletePolicy removes a partition's policy or the cluster default.
	CmdDeletePolicy CommandType = 12
	// CmdInitPolicy seeds the cluster default unless one was ever
	// written.
	CmdInitPolicy CommandType = 13
	// 14, CmdEnableCatalogRules, is in rules.go.

	// IgnoreUnknown is the flag bit of a type an older binary may skip.
	IgnoreUnknown CommandType = 0x80
)

func (t CommandType) String() string {
	if t&IgnoreUnknown != 0 {
		return (t &^ IgnoreUnknown).String() + "+ignore-unknown"
	}
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
	case CmdSetThresholds:
		return "set_thresholds"
	case CmdClearThresholds:
		return "clear_thresholds"
	case CmdInitThresholds:
		return "init_thresholds"
	case CmdExpireLease:
		return "expire_lease"
	case CmdSetClusterID:
		return "set_cluster_id"
	case CmdSetPolicy:
		return "set_policy"
	case CmdDeletePolicy:
		return "delete_policy"
	case CmdInitPolicy:
		return "init_policy"
	case CmdEnableCatalogRules:
		return "enable_catalog_rules"
	}
	return fmt.Sprintf("command(%d)", uint8(t))
}

// Command is a catalog change to replicate. Each command knows its type;
// EncodeCommand renders it in the log format of logformat.go.
type Command interface {
	Type() CommandType
}

// UpsertWorker inserts or replaces a worker. Derived fields of Worker
// (indexes, lifecycle) are ignored.
type UpsertWorker struct {
	Worker Worker
}

// PatchWorker updates the fields a patch supplies.
type PatchWorker struct {
	WorkerID uint64
	Patch    WorkerPatch
}

// DeleteWorker removes a worker.
type DeleteWorker struct {
	WorkerID uint64
}

// ExpireLease removes worker WorkerID because its lease lapsed. The
// leader decides expiry from renewals only it sees; ModifyIndex is the
// record it judged, so a registration or patch committed in between (which
// renews the lease) makes the command a no-op (ErrLeaseRenewed) instead of
// deleting a worker that just came back.
type ExpireLease struct {
	WorkerID    uint64
	ModifyIndex uint64
}

// SetNode inserts or replaces a node's metadata.
type SetNode struct {
	Node NodeMeta
}

// DeleteNode removes a node's metadata.
type DeleteNode struct {
	ID string
}

func (UpsertWorker) Type() CommandType { return CmdUpsertWorker }
func (PatchWorker) Type() CommandType  { return CmdPatchWorker }
func (DeleteWorker) Type() CommandType { return CmdDeleteWorker }
func (ExpireLease) Type() CommandType  { return CmdExpireLease }
func (SetNode) Type() CommandType      { return CmdSetNode }
func (DeleteNode) Type() CommandType   { return CmdDeleteNode }

// WorkerPatch holds the fields a PATCH supplied; nil means "keep". For the
// optional fields an empty string or 0 clears the value.
type WorkerPatch struct {
	ModelName             *string
	TenantID              *string
	Endpoint              *string
	BlockSize             *uint32
	DataParallelStartRank *uint32
	DataParallelSize      *uint32
	KVEventsEndpoints     *map[uint32]string
	// KVEventsEndpoint replaces the endpoint map with a single entry for
	// the (possibly patched) start rank.
	KVEventsEndpoint    *string
	ReplayEndpoint      *string
	TotalKVBlocks       *uint64
	MaxNumBatchedTokens *uint64
	// LeaseTTLSeconds sets the worker's lease; 0 removes it.
	LeaseTTLSeconds *uint32
}

// Empty reports whether the patch changes nothing.
func (p *WorkerPatch) Empty() bool { return *p == WorkerPatch{} }

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
	setIf(&c.LeaseTTLSeconds, p.LeaseTTLSeconds)
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
