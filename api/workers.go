package api

// Lifecycle values of a worker record (SPEC §3.1).
const (
	LifecycleSchedulable = "schedulable"
	LifecycleIncomplete  = "incomplete"
)

// WorkerFields are a worker's fields as the wire carries them, in two
// bodies: a registration (POST /workers), where worker_id is required and
// the fields left out take their defaults (model_name and tenant_id
// "default", data_parallel_size 1), and a patch (PATCH /workers/{id}),
// where an absent (nil) field keeps its value and, for the optional
// fields, an empty string or 0 clears it. Go callers registering a worker
// may find WorkerSpec easier to write.
type WorkerFields struct {
	// WorkerID is required by POST; in a PATCH it may be given only
	// with the id of the path.
	WorkerID  *uint64 `json:"worker_id,omitempty"`
	ModelName *string `json:"model_name,omitempty"`
	TenantID  *string `json:"tenant_id,omitempty"`
	// RoutingGroup is Dynamo's newer name for tenant_id; give one or
	// both with the same value.
	RoutingGroup          *string `json:"routing_group,omitempty"`
	Endpoint              *string `json:"endpoint,omitempty"`
	BlockSize             *uint32 `json:"block_size,omitempty"`
	DataParallelStartRank *uint32 `json:"data_parallel_start_rank,omitempty"`
	DataParallelSize      *uint32 `json:"data_parallel_size,omitempty"`
	// KVEventsEndpoints maps each global dp rank to the ZMQ endpoint
	// publishing its KV events; it replaces the whole map.
	KVEventsEndpoints *map[uint32]string `json:"kv_events_endpoints,omitempty"`
	// KVEventsEndpoint is the one-rank form: the map becomes this single
	// endpoint for the (possibly patched) start rank.
	KVEventsEndpoint    *string `json:"kv_events_endpoint,omitempty"`
	ReplayEndpoint      *string `json:"replay_endpoint,omitempty"`
	TotalKVBlocks       *uint64 `json:"total_kv_blocks,omitempty"`
	MaxNumBatchedTokens *uint64 `json:"max_num_batched_tokens,omitempty"`
	// LeaseTTLSeconds (1-3600) gives the worker a lease (SPEC §3.7): it
	// must be renewed (keepalive) within that many seconds or the leader
	// removes the worker. 0 or absent: no lease (a PATCH with 0 removes
	// it). A registration, or a PATCH that sets lease_ttl_s, renews the
	// lease; a PATCH of anything else leaves its deadline alone.
	LeaseTTLSeconds *uint32 `json:"lease_ttl_s,omitempty"`
}

// MaxLeaseTTLSeconds is the longest lease a worker may hold.
const MaxLeaseTTLSeconds = 3600

// WorkerSpec is a worker registration as a Go caller writes it: zero
// values mean "the default". Body turns it into the POST /workers body.
type WorkerSpec struct {
	WorkerID              uint64
	ModelName             string
	TenantID              string
	Endpoint              string
	BlockSize             uint32
	DataParallelStartRank uint32
	DataParallelSize      uint32 // 0 means 1
	KVEventsEndpoints     map[uint32]string
	ReplayEndpoint        string
	TotalKVBlocks         uint64
	MaxNumBatchedTokens   uint64
	LeaseTTLSeconds       uint32 // 0: no lease
}

// Body is the registration as the wire body: worker_id always, every
// other field only when it is not zero.
func (s WorkerSpec) Body() WorkerFields {
	p := WorkerFields{WorkerID: Ptr(s.WorkerID)}
	setNonZero(&p.ModelName, s.ModelName)
	setNonZero(&p.TenantID, s.TenantID)
	setNonZero(&p.Endpoint, s.Endpoint)
	setNonZero(&p.BlockSize, s.BlockSize)
	setNonZero(&p.DataParallelStartRank, s.DataParallelStartRank)
	setNonZero(&p.DataParallelSize, s.DataParallelSize)
	setNonZero(&p.ReplayEndpoint, s.ReplayEndpoint)
	setNonZero(&p.TotalKVBlocks, s.TotalKVBlocks)
	setNonZero(&p.MaxNumBatchedTokens, s.MaxNumBatchedTokens)
	setNonZero(&p.LeaseTTLSeconds, s.LeaseTTLSeconds)
	if len(s.KVEventsEndpoints) > 0 {
		eps := make(map[uint32]string, len(s.KVEventsEndpoints))
		for r, ep := range s.KVEventsEndpoints {
			eps[r] = ep
		}
		p.KVEventsEndpoints = &eps
	}
	return p
}

func setNonZero[T comparable](dst **T, v T) {
	var zero T
	if v != zero {
		*dst = &v
	}
}

// Worker is a catalog record as reads show it (GET /workers, /ready).
type Worker struct {
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
	// LeaseTTLSeconds is the worker's lease; absent when it has none.
	LeaseTTLSeconds uint32 `json:"lease_ttl_s,omitempty"`
	// CreateIndex is the Raft index that first inserted this worker id;
	// ModifyIndex the one that last changed it; BlockSizeIndex the one at
	// which its current block size was set.
	CreateIndex    uint64 `json:"create_index"`
	ModifyIndex    uint64 `json:"modify_index"`
	BlockSizeIndex uint64 `json:"block_size_index"`
	// Lifecycle is LifecycleSchedulable or LifecycleIncomplete, a pure
	// function of the catalog; NotSchedulableReasons says why a worker is
	// incomplete.
	Lifecycle             string   `json:"lifecycle"`
	NotSchedulableReasons []string `json:"not_schedulable_reasons,omitempty"`
	// ThresholdsNotChecked lists the model's busy thresholds that load
	// shedding cannot check for this worker, with why (e.g. no
	// total_kv_blocks for active_decode_blocks_threshold).
	ThresholdsNotChecked []string `json:"thresholds_not_checked,omitempty"`
	// Listeners is this node's KV event listener per dp rank: local
	// state, absent from write answers and for workers without listeners.
	Listeners map[uint32]ListenerStatus `json:"listeners,omitempty"`
	// SchedulableHere says whether the node that answers would select the
	// worker: schedulable, and not every rank's listener stale there
	// (SPEC §3.7). Local state like Listeners, so only reads carry it;
	// write answers, made on the leader, do not.
	SchedulableHere *bool `json:"schedulable_here,omitempty"`
}

// Schedulable reports whether the record may be selected.
func (w *Worker) Schedulable() bool { return w.Lifecycle == LifecycleSchedulable }

// WorkerWritten answers a catalog write: the record after the write (the
// removed one for DELETE) and the Raft index the write was applied at.
type WorkerWritten struct {
	Worker
	CatalogIndex uint64 `json:"catalog_index"`
}

// KeepAliveRequest is the body of POST /workers/keepalive: renew the
// leases of many workers in one request.
type KeepAliveRequest struct {
	WorkerIDs []uint64 `json:"worker_ids"`
}

// MaxKeepAliveBatch bounds the ids of one keepalive request.
const MaxKeepAliveBatch = 65536

// Lease is a renewed lease: POST /workers/{id}/keepalive answers one.
type Lease struct {
	WorkerID        uint64 `json:"worker_id"`
	LeaseTTLSeconds uint32 `json:"lease_ttl_s"`
	// ExpiresInMs is how long the lease lasts without another renewal.
	ExpiresInMs int64 `json:"expires_in_ms"`
}

// KeepAliveAnswer answers POST /workers/keepalive: the leases renewed, and
// the ids that could not be, each with the code and message the
// one-worker route would have answered (not_found: unknown worker or lease
// already lapsed, register it again; conflict: registered without a
// lease).
type KeepAliveAnswer struct {
	Leases []Lease          `json:"leases"`
	Failed []KeepAliveError `json:"failed,omitempty"`
}

// KeepAliveError is one id a batch keepalive could not renew.
type KeepAliveError struct {
	WorkerID uint64 `json:"worker_id"`
	Code     string `json:"code"`
	Error    string `json:"error"`
}

// States of a KV event listener.
const (
	ListenerConnecting = "connecting"
	ListenerActive     = "active"
	ListenerFailed     = "failed"
	// ListenerStale: down (failed or retrying) longer than
	// --stale-listener-after; this node does not select the rank.
	ListenerStale = "stale"
)

// ListenerStatus is one rank's KV event listener on the node that answers.
type ListenerStatus struct {
	State            string `json:"state"`
	LastError        string `json:"last_error,omitempty"`
	Endpoint         string `json:"endpoint"`
	ReplayEndpoint   string `json:"replay_endpoint,omitempty"`
	LastSeq          uint64 `json:"last_seq"`
	Messages         uint64 `json:"messages"`
	Gaps             uint64 `json:"gaps"`
	LostMessages     uint64 `json:"lost_messages"`
	Restarts         uint64 `json:"restarts"`
	ReplayFailures   uint64 `json:"replay_failures"`
	DroppedFrames    uint64 `json:"dropped_frames"`
	DroppedMalformed uint64 `json:"dropped_malformed"`
	// DroppedQueueFull counts live messages dropped because the listener's
	// queue was full (in messages or bytes; then replayed or counted
	// lost), DroppedOversize frames past the size limit, ReplayRejected
	// replay replies outside the asked range or out of order.
	DroppedQueueFull uint64 `json:"dropped_queue_full"`
	DroppedOversize  uint64 `json:"dropped_oversize"`
	ReplayRejected   uint64 `json:"replay_rejected"`
	// QueuedBytes is the live queue now, QueuedBytesPeak the most it held.
	QueuedBytes     int64 `json:"queued_bytes"`
	QueuedBytesPeak int64 `json:"queued_bytes_peak"`
}
