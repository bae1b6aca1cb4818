package fsm

import (
	"fmt"
	"github.com/kvselect/kvselect/internal/zmqaddr"
	"maps"
	"slices"
	"strconv"
)

// DefaultScope is the model_name and tenant_id used when a request omits them.
const DefaultScope = "default"

// Limits on catalog records. They bound memory and keep rank arithmetic far
// from overflow; real deployments are orders of magnitude below them.
const (
	MaxBlockSize        = 1 << 16
	MaxDataParallelSize = 4096
	MaxRank             = 1 << 20
	MaxStringLen        = 1024
	MaxLeaseTTLSeconds  = 3600
	// MaxRanksPerPartition bounds the ranks of the schedulable workers of
	// one (model, tenant): the index keeps at most this many holders per
	// block. Workers past it are incomplete.
	MaxRanksPerPartition = 1<<16 - 1
)

// PartitionKey scopes all selection, index and load state.
type PartitionKey struct {
	Model  string
	Tenant string
}

// String renders the key as "<model>:<tenant>", the form used by /dump.
func (k PartitionKey) String() string { return k.Model + ":" + k.Tenant }

// Worker is one catalog record. Records reachable from a published Catalog
// are immutable: never modify one in place, copy it. This is the catalog's
// own type: the API's record (api.Worker) and the log's (logformat.go) are
// separate, so neither can change the other by accident.
type Worker struct {
	WorkerID  uint64
	ModelName string
	TenantID  string
	Endpoint  string
	BlockSize uint32
	// DataParallelStartRank and DataParallelSize give the global dp ranks
	// [start, start+size) this worker serves.
	DataParallelStartRank uint32
	DataParallelSize      uint32
	// KVEventsEndpoints maps a global dp rank to the ZMQ endpoint publishing
	// that rank's KV events.
	KVEventsEndpoints   map[uint32]string
	ReplayEndpoint      string
	TotalKVBlocks       uint64
	MaxNumBatchedTokens uint64
	// LeaseTTLSeconds, when not 0, is the worker's lease: the leader
	// removes the worker (ExpireLease) once that long passes without a
	// renewal (SPEC §3.7): a keepalive, a registration, or a patch that
	// sets lease_ttl_s. A patch of anything else leaves the deadline
	// alone, so a worker that stopped renewing cannot be kept alive by
	// an operator's unrelated edits.
	LeaseTTLSeconds uint32
	// LeaseIndex is the Raft index of the command that last granted the
	// lease (a registration with a lease, or a patch that set
	// lease_ttl_s); 0 without a lease. The leader's lease book restarts a
	// deadline when it changes (cluster/lease.go), and only then.
	LeaseIndex uint64

	// CreateIndex is the Raft index that first inserted this worker id;
	// ModifyIndex the one that last changed it.
	CreateIndex uint64
	ModifyIndex uint64
	// BlockSizeIndex is the Raft index at which the worker's current
	// block_size was set. A partition keeps its block size while any
	// worker holds it; only then does it come from the worker that has
	// held its block size longest, so a worker that changes its block
	// size becomes the odd one out rather than its partition.
	BlockSizeIndex uint64

	// NotSchedulableReasons and schedulable are derived from the catalog
	// on every apply; they are never taken from a command.
	NotSchedulableReasons []string
	schedulable           bool
}

// Partition returns the worker's partition key.
func (w *Worker) Partition() PartitionKey {
	return PartitionKey{Model: w.ModelName, Tenant: w.TenantID}
}

// Schedulable reports whether the worker may be selected.
func (w *Worker) Schedulable() bool { return w.schedulable }

// Ranks returns the worker's global dp ranks in order.
func (w *Worker) Ranks() []uint32 {
	out := make([]uint32, w.DataParallelSize)
	for i := range out {
		out[i] = w.DataParallelStartRank + uint32(i)
	}
	return out
}

// HasRank reports whether rank is one of the worker's dp ranks.
func (w *Worker) HasRank(rank uint32) bool {
	return rank >= w.DataParallelStartRank && rank-w.DataParallelStartRank < w.DataParallelSize
}

// clone returns a deep copy whose maps and slices are not shared.
func (w *Worker) clone() *Worker {
	c := *w
	if w.KVEventsEndpoints != nil {
		c.KVEventsEndpoints = make(map[uint32]string, len(w.KVEventsEndpoints))
		for k, v := range w.KVEventsEndpoints {
			c.KVEventsEndpoints[k] = v
		}
	}
	if w.NotSchedulableReasons != nil {
		c.NotSchedulableReasons = append([]string(nil), w.NotSchedulableReasons...)
	}
	return &c
}

// normalize fills defaults so that equal specs compare equal.
func (w *Worker) normalize() {
	if w.ModelName == "" {
		w.ModelName = DefaultScope
	}
	if w.TenantID == "" {
		w.TenantID = DefaultScope
	}
	if w.KVEventsEndpoints == nil {
		w.KVEventsEndpoints = map[uint32]string{}
	}
}

// ValidateSpec checks the ranges and formats of a worker as submitted by a
// client. Completeness (a missing endpoint, block size 0, a rank without a
// KV events endpoint) is not an error: such a worker is stored as
// "incomplete". The returned error is a *FieldError.
func ValidateSpec(w *Worker) error {
	bad := func(field, format string, args ...any) error {
		return &FieldError{Field: field, Problem: fmt.Sprintf(format, args...)}
	}
	for _, f := range []struct{ field, value string }{
		{"model_name", w.ModelName}, {"tenant_id", w.TenantID},
		{"endpoint", w.Endpoint}, {"replay_endpoint", w.ReplayEndpoint},
	} {
		if len(f.value) > MaxStringLen {
			return bad(f.field, "longer than %d bytes", MaxStringLen)
		}
	}
	if w.LeaseTTLSeconds > MaxLeaseTTLSeconds {
		return bad("lease_ttl_s", "must be between 1 and %d seconds (0: no lease)", MaxLeaseTTLSeconds)
	}
	if w.BlockSize > MaxBlockSize {
		return bad("block_size", "must be at most %d", MaxBlockSize)
	}
	if w.DataParallelSize == 0 {
		return bad("data_parallel_size", "must be at least 1")
	}
	if w.DataParallelSize > MaxDataParallelSize {
		return bad("data_parallel_size", "must be at most %d", MaxDataParallelSize)
	}
	if uint64(w.DataParallelStartRank)+uint64(w.DataParallelSize) > MaxRank {
		return bad("data_parallel_start_rank", "rank range must end at or below %d", MaxRank)
	}
	if len(w.KVEventsEndpoints) > MaxDataParallelSize {
		return bad("kv_events_endpoints", "more than %d entries", MaxDataParallelSize)
	}
	// Sorted, so that with several bad entries every node reports the same.
	for _, rank := range slices.Sorted(maps.Keys(w.KVEventsEndpoints)) {
		if err := ValidateZMQEndpoint(w.KVEventsEndpoints[rank]); err != nil {
			return bad(fmt.Sprintf("kv_events_endpoints[%q]", strconv.FormatUint(uint64(rank), 10)), "%v", err)
		}
	}
	if w.ReplayEndpoint != "" {
		if err := ValidateZMQEndpoint(w.ReplayEndpoint); err != nil {
			return bad("replay_endpoint", "%v", err)
		}
	}
	return nil
}

// ValidateZMQEndpoint accepts the endpoint forms a ZMQ socket can connect
// to: tcp://host:port, ipc://path and inproc://name.
func ValidateZMQEndpoint(ep string) error {
	if len(ep) > MaxStringLen {
		return fmt.Errorf("longer than %d bytes", MaxStringLen)
	}
	addr, err := zmqaddr.Parse(ep)
	if err == nil && addr.Transport == "tcp" && (addr.Host == "" || addr.Host == "*") {
		err = fmt.Errorf("%q: want tcp://host:port", ep)
	}
	return err
}

// staticReasons lists what makes a worker incomplete on its own, without
// looking at other workers of its partition. Sorted for determinism.
func staticReasons(w *Worker) []string {
	var reasons []string
	if w.Endpoint == "" {
		reasons = append(reasons, "endpoint is required")
	}
	if w.BlockSize == 0 {
		reasons = append(reasons, "block_size must be greater than 0")
	}
	for _, rank := range w.Ranks() {
		if w.KVEventsEndpoints[rank] == "" {
			reasons = append(reasons, fmt.Sprintf("kv_events endpoint is required for dp_rank %d", rank))
		}
	}
	var outside []uint32
	for rank := range w.KVEventsEndpoints {
		if !w.HasRank(rank) {
			outside = append(outside, rank)
		}
	}
	slices.Sort(outside)
	for _, rank := range outside {
		reasons = append(reasons, fmt.Sprintf(
			"kv_events endpoint for dp_rank %d is outside the data parallel range [%d, %d)",
			rank, w.DataParallelStartRank, w.DataParallelStartRank+w.DataParallelSize))
	}
	return reasons
}
