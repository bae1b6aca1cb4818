package fsm

import (
	"encoding/json"
	"fmt"
)

// The log format. A Raft log entry is one CommandType byte followed by the
// command's JSON payload; a snapshot is one JSON document. Both are encoded
// from the types of this file and from nothing else: the public API's
// structs (package api) may rename or reshape fields freely without
// changing how an old entry decodes.
//
// Format 1 is the payload of every command type 1-5, field for field as
// the first releases wrote it. Golden files in testdata/log pin it: each
// must decode to the same catalog forever, and the current encoder must
// still produce them byte for byte. To change a payload incompatibly, add
// a new command type (and keep decoding the old one); to add an optional
// field, add it with omitempty, so older binaries read the entry as
// before.
//
// Snapshots carry a version: 1 held workers only, 2 added node metadata, 3
// busy thresholds. A snapshot is written at the lowest version that holds
// its content, so a catalog without thresholds stays readable by the
// binaries before them. What came later (the cluster id, a node's
// incarnation and epoch, a worker's lease index) are optional fields,
// which older binaries ignore, so that a follower of the release before
// can install a snapshot of this one during a rolling upgrade. Version 4
// (the cluster id as a version of its own, written by no release) is read
// too.
//
// Threshold commands (types 6-8) share one payload, thresholdsV1. Type 9
// (expire_lease) is expireLeaseV1; it has no IgnoreUnknown flag, because a
// binary that skipped it would keep a worker every other node dropped.
// Type 10 (set_cluster_id) is setClusterIDV1, written with the
// IgnoreUnknown flag (0x8a): a binary before cluster ids skips it.
// The policy commands, types 11-13 (set_policy, delete_policy,
// init_policy), share one payload, policyV1, and are written with the
// IgnoreUnknown flag too (0x8b-0x8d). Snapshots hold the policy entries
// and whether a cluster default was ever written as two more optional
// fields (policies, policy_default_seeded), not as a new version: a
// binary before them drops them on restore, as it skips the commands.
//
// Sticky block sizes (a partition keeps its block size while any worker
// holds it) are history the workers alone do not tell: a snapshot carries
// them as one more field (partition_block_sizes), and only for the
// partitions where the workers alone would give another size. The
// partitions that lost their last worker (known.go) are one more:
// retired_partitions. Both exist only once the catalog rules are on
// (rules.go, enable_catalog_rules, type 14, enableCatalogRulesV1, no
// IgnoreUnknown flag), and a snapshot of such a catalog is version 5 with
// catalog_rules set: a binary of the release before refuses it rather
// than derive the old way from it. A snapshot without catalog_rules is
// read with the rules off, as a replay of the log that wrote it gives.
// A node record advertises the rules its writer knows (catalog_rules,
// optional).
//
// A node record (nodeV1) gained two optional fields under the omitempty
// rule: incarnation in set_node (the writing process's start, see
// NodeMeta) and epoch in snapshots (derived, like modify_index).

// workerV1 is a worker record in entries and snapshots. Derived fields are
// written (as zero in commands, for human readers in snapshots) and
// recomputed on apply and restore, never trusted.
type workerV1 struct {
	WorkerID              uint64            `json:"worker_id"`
	ModelName             string            `json:"model_name"`
	TenantID              string            `json:"tenant_id"`
	Endpoint              string            `json:"endpoint"`
	BlockSize             uint32            `json:"block_size"`
	DataParallelStartRank uint32            `json:"data_parallel_start_rank"`
	DataParallelSize      uint32            `json:"data_parallel_size"`
	KVEventsEndpoints     map[uint32]string `json:"kv_events_endpoints"`
	ReplayEndpoint        string            `json:"replay_endpoint,omitempty"`
	TotalKVBlocks         uint64            `json:"total_kv_blocks,omitempty"`
	MaxNumBatchedTokens   uint64            `json:"max_num_batched_tokens,omitempty"`
	LeaseTTLSeconds       uint32            `json:"lease_ttl_s,omitempty"`
	CreateIndex           uint64            `json:"create_index"`
	ModifyIndex           uint64            `json:"modify_index"`
	BlockSizeIndex        uint64            `json:"block_size_index"`
	LeaseIndex            uint64            `json:"lease_index,omitempty"`
	Lifecycle             string            `json:"lifecycle"`
	NotSchedulableReasons []string          `json:"not_schedulable_reasons,omitempty"`
}

// Lifecycle words written into snapshots for people reading them.
const (
	snapshotSchedulable = "schedulable"
	snapshotIncomplete  = "incomplete"
)

func encodeWorker(w *Worker, derived bool) workerV1 {
	v := workerV1{
		WorkerID: w.WorkerID, ModelName: w.ModelName, TenantID: w.TenantID, Endpoint: w.Endpoint,
		BlockSize: w.BlockSize, DataParallelStartRank: w.DataParallelStartRank, DataParallelSize: w.DataParallelSize,
		KVEventsEndpoints: w.KVEventsEndpoints, ReplayEndpoint: w.ReplayEndpoint,
		TotalKVBlocks: w.TotalKVBlocks, MaxNumBatchedTokens: w.MaxNumBatchedTokens,
		LeaseTTLSeconds: w.LeaseTTLSeconds,
	}
	if derived {
		v.CreateIndex, v.ModifyIndex, v.BlockSizeIndex, v.LeaseIndex = w.CreateIndex, w.ModifyIndex, w.BlockSizeIndex, w.LeaseIndex
		v.Lifecycle, v.NotSchedulableReasons = snapshotIncomplete, w.NotSchedulableReasons
		if w.schedulable {
			v.Lifecycle = snapshotSchedulable
		}
	}
	return v
}

// decodeWorker takes the specification of a record; indexes are kept only
// when restoring a snapshot.
func (v *workerV1) decode(withIndexes bool) *Worker {
	w := &Worker{
		WorkerID: v.WorkerID, ModelName: v.ModelName, TenantID: v.TenantID, Endpoint: v.Endpoint,
		BlockSize: v.BlockSize, DataParallelStartRank: v.DataParallelStartRank, DataParallelSize: v.DataParallelSize,
		KVEventsEndpoints: v.KVEventsEndpoints, ReplayEndpoint: v.ReplayEndpoint,
		TotalKVBlocks: v.TotalKVBlocks, MaxNumBatchedTokens: v.MaxNumBatchedTokens,
		LeaseTTLSeconds: v.LeaseTTLSeconds,
	}
	if withIndexes {
		w.CreateIndex, w.ModifyIndex, w.BlockSizeIndex, w.LeaseIndex = v.CreateIndex, v.ModifyIndex, v.BlockSizeIndex, v.LeaseIndex
		if w.LeaseTTLSeconds > 0 && w.LeaseIndex == 0 {
			// A snapshot from before lease_index: the last change is
			// the best account of the last grant there is.
			w.LeaseIndex = w.ModifyIndex
		}
	}
	w.normalize()
	return w
}

type upsertWorkerV1 struct {
	Worker workerV1 `json:"worker"`
}

type patchWorkerV1 struct {
	WorkerID uint64        `json:"worker_id"`
	Patch    workerPatchV1 `json:"patch"`
}

type workerPatchV1 struct {
	ModelName             *string            `json:"model_name,omitempty"`
	TenantID              *string            `json:"tenant_id,omitempty"`
	Endpoint              *string            `json:"endpoint,omitempty"`
	BlockSize             *uint32            `json:"block_size,omitempty"`
	DataParallelStartRank *uint32            `json:"data_parallel_start_rank,omitempty"`
	DataParallelSize      *uint32            `json:"data_parallel_size,omitempty"`
	KVEventsEndpoints     *map[uint32]string `json:"kv_events_endpoints,omitempty"`
	KVEventsEndpoint      *string            `json:"kv_events_endpoint,omitempty"`
	ReplayEndpoint        *string            `json:"replay_endpoint,omitempty"`
	TotalKVBlocks         *uint64            `json:"total_kv_blocks,omitempty"`
	MaxNumBatchedTokens   *uint64            `json:"max_num_batched_tokens,omitempty"`
	LeaseTTLSeconds       *uint32            `json:"lease_ttl_s,omitempty"`
}

type expireLeaseV1 struct {
	WorkerID    uint64 `json:"worker_id"`
	ModifyIndex uint64 `json:"modify_index"`
}

// thresholdsV1 is the payload of the threshold commands and a record of
// a snapshot (where ModifyIndex is kept; in commands it is zero and
// omitted).
type thresholdsV1 struct {
	Model               string   `json:"model"`
	ActiveDecodeBlocks  *float64 `json:"active_decode_blocks_threshold,omitempty"`
	ActivePrefillTokens *uint64  `json:"active_prefill_tokens_threshold,omitempty"`
	ModifyIndex         uint64   `json:"modify_index,omitempty"`
}

func (v thresholdsV1) decode() Thresholds {
	return Thresholds{Model: v.Model, ActiveDecodeBlocks: v.ActiveDecodeBlocks,
		ActivePrefillTokens: v.ActivePrefillTokens, ModifyIndex: v.ModifyIndex}
}

type deleteWorkerV1 struct {
	WorkerID uint64 `json:"worker_id"`
}

type nodeV1 struct {
	ID          string `json:"id"`
	HTTPAddr    string `json:"http_addr"`
	ReplicaSync string `json:"replica_sync,omitempty"`
	ModifyIndex uint64 `json:"modify_index"`
	Incarnation uint64 `json:"incarnation,omitempty"`
	// Epoch is written in snapshots only; a set_node's is ignored (the
	// FSM derives it).
	Epoch uint64 `json:"epoch,omitempty"`
	// CatalogRules: what the writer's binary applies (NodeMeta); a
	// release before them ignores the field.
	CatalogRules uint32 `json:"catalog_rules,omitempty"`
}

// policyV1 is the payload of the policy commands and a record of a
// snapshot (where ModifyIndex is kept; in commands it is zero and
// omitted). A delete carries the key only; an init, the policy only (its
// key is always the cluster default's). Parameters are encoded with sorted
// keys (encoding/json sorts map keys), so an entry is always the same
// bytes.
type policyV1 struct {
	ModelName   string             `json:"model_name,omitempty"`
	TenantID    string             `json:"tenant_id,omitempty"`
	Policy      string             `json:"policy,omitempty"`
	Parameters  map[string]float64 `json:"parameters,omitempty"`
	ModifyIndex uint64             `json:"modify_index,omitempty"`
}

func encodePolicy(p Policy) policyV1 {
	return policyV1{ModelName: p.Key.Model, TenantID: p.Key.Tenant, Policy: p.Name, Parameters: p.Params,
		ModifyIndex: p.ModifyIndex}
}

func (v policyV1) decode() Policy {
	if len(v.Parameters) == 0 {
		v.Parameters = nil // {} and none are the same entry
	}
	return Policy{Key: PartitionKey{Model: v.ModelName, Tenant: v.TenantID}, Name: v.Policy, Params: v.Parameters,
		ModifyIndex: v.ModifyIndex}
}

type setClusterIDV1 struct {
	ClusterID string `json:"cluster_id"`
}

type setNodeV1 struct {
	Node nodeV1 `json:"node"`
}

type deleteNodeV1 struct {
	ID string `json:"id"`
}

// encodeNode writes a record; derived says whether its epoch goes too
// (snapshots, not commands).
func encodeNode(n NodeMeta, derived bool) nodeV1 {
	v := nodeV1{ID: n.ID, HTTPAddr: n.HTTPAddr, ReplicaSync: n.ReplicaSync, ModifyIndex: n.ModifyIndex,
		Incarnation: n.Incarnation, CatalogRules: n.CatalogRules}
	if derived {
		v.Epoch = n.Epoch
	}
	return v
}

// decode reads a record; the epoch is kept only when restoring a
// snapshot.
func (v nodeV1) decode(derived bool) NodeMeta {
	n := NodeMeta{ID: v.ID, HTTPAddr: v.HTTPAddr, ReplicaSync: v.ReplicaSync, ModifyIndex: v.ModifyIndex,
		Incarnation: v.Incarnation, CatalogRules: v.CatalogRules}
	if derived {
		n.Epoch = v.Epoch
	}
	return n
}

// EncodeCommand renders a command as a log entry.
func EncodeCommand(c Command) ([]byte, error) {
	var payload any
	switch c := c.(type) {
	case UpsertWorker:
		payload = upsertWorkerV1{Worker: encodeWorker(&c.Worker, false)}
	case PatchWorker:
		p := c.Patch
		payload = patchWorkerV1{WorkerID: c.WorkerID, Patch: workerPatchV1{
			ModelName: p.ModelName, TenantID: p.TenantID, Endpoint: p.Endpoint, BlockSize: p.BlockSize,
			DataParallelStartRank: p.DataParallelStartRank, DataParallelSize: p.DataParallelSize,
			KVEventsEndpoints: p.KVEventsEndpoints, KVEventsEndpoint: p.KVEventsEndpoint,
			ReplayEndpoint: p.ReplayEndpoint, TotalKVBlocks: p.TotalKVBlocks, MaxNumBatchedTokens: p.MaxNumBatchedTokens,
			LeaseTTLSeconds: p.LeaseTTLSeconds,
		}}
	case DeleteWorker:
		payload = deleteWorkerV1{WorkerID: c.WorkerID}
	case ExpireLease:
		payload = expireLeaseV1{WorkerID: c.WorkerID, ModifyIndex: c.ModifyIndex}
	case SetNode:
		payload = setNodeV1{Node: encodeNode(c.Node, false)}
	case DeleteNode:
		payload = deleteNodeV1{ID: c.ID}
	case SetClusterID:
		payload = setClusterIDV1{ClusterID: c.ID.String()}
	case SetThresholds:
		payload = thresholdsV1{Model: c.Model, ActiveDecodeBlocks: c.ActiveDecodeBlocks, ActivePrefillTokens: c.ActivePrefillTokens}
	case ClearThresholds:
		payload = thresholdsV1{Model: c.Model}
	case InitThresholds:
		payload = thresholdsV1{Model: c.Model, ActiveDecodeBlocks: c.ActiveDecodeBlocks, ActivePrefillTokens: c.ActivePrefillTokens}
	case SetPolicy:
		payload = encodePolicy(Policy{Key: c.Key, Name: c.Name, Params: c.Params})
	case DeletePolicy:
		payload = policyV1{ModelName: c.Key.Model, TenantID: c.Key.Tenant}
	case InitPolicy:
		payload = policyV1{Policy: c.Name, Parameters: c.Params}
	case EnableCatalogRules:
		payload = enableCatalogRulesV1{Rules: c.Rules}
	default:
		return nil, fmt.Errorf("encode: unknown command %T", c)
	}
	body, err := json.Marshal(payload)
	if err != nil {
		return nil, fmt.Errorf("encode %s: %w", c.Type(), err)
	}
	return append([]byte{byte(c.Type())}, body...), nil
}

// decodePayload decodes a command's payload. It panics when the payload
// cannot be decoded: every node would hit the same entry, and skipping it
// silently would make this node's catalog diverge from the log. Fields it
// does not know are ignored, never an error (so no DisallowUnknownFields):
// they are the optional fields a newer binary adds under the omitempty
// rule above, which an older binary must read the entry without.
func decodePayload[T any](t CommandType, payload []byte) T {
	var v T
	if err := json.Unmarshal(payload, &v); err != nil {
		panic(fmt.Sprintf("fsm: undecodable %s payload: %v", t, err))
	}
	return v
}

func (v workerPatchV1) decode() WorkerPatch {
	return WorkerPatch{
		ModelName: v.ModelName, TenantID: v.TenantID, Endpoint: v.Endpoint, BlockSize: v.BlockSize,
		DataParallelStartRank: v.DataParallelStartRank, DataParallelSize: v.DataParallelSize,
		KVEventsEndpoints: v.KVEventsEndpoints, KVEventsEndpoint: v.KVEventsEndpoint,
		ReplayEndpoint: v.ReplayEndpoint, TotalKVBlocks: v.TotalKVBlocks, MaxNumBatchedTokens: v.MaxNumBatchedTokens,
		LeaseTTLSeconds: v.LeaseTTLSeconds,
	}
}

// snapshotV4 is the on-disk form of a snapshot, every version alike:
// version 2 has no thresholds, version 1 no nodes either; the cluster id
// and the policies are optional in any.
type snapshotV4 struct {
	Version    int            `json:"version"`
	Index      uint64         `json:"index"`
	ClusterID  string         `json:"cluster_id,omitempty"`
	Workers    []workerV1     `json:"workers"`
	Nodes      []nodeV1       `json:"nodes,omitempty"`
	Thresholds []thresholdsV1 `json:"thresholds,omitempty"`
	Policies   []policyV1     `json:"policies,omitempty"`
	// DefaultPolicySeeded: a cluster default was ever written, so
	// init_policy changes nothing (Catalog.DefaultPolicySeeded).
	DefaultPolicySeeded bool `json:"policy_default_seeded,omitempty"`
	// BlockSizes are the partitions whose block size is not the one their
	// workers alone give (the most senior worker's): a partition keeps its
	// block size while any worker holds it (stickyBlockSize), which only
	// the log's history tells. Optional: a binary before sticky block
	// sizes ignores it and derives them all from the workers, as it did
	// when it applied the log.
	BlockSizes []partitionBlockSizeV1 `json:"partition_block_sizes,omitempty"`
	// Retired are the partitions that lost their last worker (known.go),
	// optional for the same reason: a binary before it ignores them.
	Retired []retiredV1 `json:"retired_partitions,omitempty"`
	// CatalogRules are the catalog rules on (rules.go); absent (0) in
	// every snapshot before them, which replays as rules 0. Nonzero makes
	// the snapshot version 5.
	CatalogRules uint32 `json:"catalog_rules,omitempty"`
}

// partitionBlockSizeV1 is one partition's sticky block size in a snapshot.
type partitionBlockSizeV1 struct {
	ModelName string `json:"model_name"`
	TenantID  string `json:"tenant_id"`
	BlockSize uint32 `json:"block_size"`
}

// snapshotVersion is the newest version Snapshot writes and Restore reads.
const snapshotVersion = 5

func encodeSnapshot(c *Catalog) snapshotV4 {
	s := snapshotV4{Version: 2, Index: c.index, Workers: []workerV1{}}
	for _, t := range c.AllThresholds() {
		s.Version = 3
		s.Thresholds = append(s.Thresholds, thresholdsV1{Model: t.Model, ActiveDecodeBlocks: t.ActiveDecodeBlocks,
			ActivePrefillTokens: t.ActivePrefillTokens, ModifyIndex: t.ModifyIndex})
	}
	if !c.clusterID.IsZero() {
		// An optional field, not a new version: the release before reads
		// a version-3 snapshot with it (it ignores the field), and must,
		// or a follower of that release could never install a snapshot
		// of a leader of this one during a rolling upgrade. Version 4
		// (written by no release) is still read.
		s.ClusterID = c.clusterID.String()
	}
	for _, w := range c.Workers("", "") {
		s.Workers = append(s.Workers, encodeWorker(w, true))
	}
	for _, n := range c.Nodes() {
		s.Nodes = append(s.Nodes, encodeNode(n, true))
	}
	// Optional fields too, for the cluster id's reason: a follower of the
	// release before installs the snapshot without them (and selects
	// with its own --policy, as it does having skipped the commands).
	for _, p := range c.Policies() {
		s.Policies = append(s.Policies, encodePolicy(p))
	}
	s.DefaultPolicySeeded = c.policySeeded
	if c.rules == 0 {
		// The rules of the release before: the workers say it all, and
		// the snapshot is one that release reads.
		return s
	}
	// A version the release before refuses: it would derive block sizes
	// and unknown partitions without the history below.
	s.Version, s.CatalogRules = 5, c.rules
	// Only where the workers alone would say otherwise.
	for _, p := range c.Partitions() {
		if p.BlockSize != seniorBlockSize(bySeniority(c.members(p))) {
			s.BlockSizes = append(s.BlockSizes, partitionBlockSizeV1{
				ModelName: p.Key.Model, TenantID: p.Key.Tenant, BlockSize: p.BlockSize})
		}
	}
	if len(c.retired) > 0 {
		s.Retired = encodeRetired(c)
	}
	return s
}
