package api

// Health answers GET /health.
type Health struct {
	Status string `json:"status"`
}

// Ready answers GET /ready, with 200 when Ready and 503 otherwise.
type Ready struct {
	Ready bool `json:"ready"`
	// SchedulableWorkers counts the schedulable workers this node would
	// select: not those whose every rank's listener is stale here.
	SchedulableWorkers int `json:"schedulable_workers"`
	// Recovering is true while the node loads its KV index from a peer's
	// dump at startup (SPEC §7); its listeners start once it is false.
	Recovering bool         `json:"recovering"`
	Workers    []Worker     `json:"workers"`
	Cluster    ReadyCluster `json:"cluster"`
}

// ReadyCluster is the node's place in the cluster, as /ready shows it.
type ReadyCluster struct {
	NodeID       string `json:"node_id"`
	State        string `json:"state"`
	Leader       string `json:"leader"`
	AppliedIndex uint64 `json:"applied_index"`
	CatalogIndex uint64 `json:"catalog_index"`
}

// Readyz answers GET /readyz, an orchestrator's readiness probe: 200 when
// Ready, that is when this node is a voter of the Raft configuration, a
// leader is known (or it leads), and it has applied every entry up to the
// commit index it had learned from the leader when the request came
// (waiting up to half a second for that); else 503 with Error, Code
// (CodeNotReady) and Reason. Unlike GET /ready (SPEC §3.2: can this node
// select?) it says nothing about workers.
//
// GET /readyz?for=selection (ReadyzForSelection, the pod readiness probe)
// answers the same body, judged otherwise: Ready once CaughtUp and not
// Recovering, and from then on without a leader or a quorum.
type Readyz struct {
	Ready bool `json:"ready"`
	// Error and Code make a 503 an error answer like any other.
	Error string `json:"error,omitempty"`
	Code  Code   `json:"code,omitempty"`
	// Reason is why the node is not ready, one of the Readyz* reasons.
	Reason string `json:"reason,omitempty"`
	NodeID string `json:"node_id"`
	State  string `json:"state"`
	// Leader is the leader's id ("" when none is known).
	Leader string `json:"leader"`
	// Member: this node is in the Raft configuration, with Suffrage.
	Member   bool   `json:"member"`
	Suffrage string `json:"suffrage,omitempty"`
	// CommitIndex, AppliedIndex and CatalogIndex are /cluster/status's.
	CommitIndex  uint64 `json:"commit_index"`
	AppliedIndex uint64 `json:"applied_index"`
	CatalogIndex uint64 `json:"catalog_index"`
	// CaughtUp: since it started, this node has once applied every entry
	// up to a commit index learned from a leader (it stays true).
	CaughtUp bool `json:"caught_up"`
	// Recovering: the node is still recovering its KV index from a peer
	// (SPEC §7), as /ready says.
	Recovering bool `json:"recovering"`
}

// ReadyzForSelection is the value of QueryFor that asks GET /readyz
// whether this node can serve selections (SPEC §3.2).
const ReadyzForSelection = "selection"

// Why GET /readyz answers 503, checked in this order; ?for=selection
// answers ReadyzShutDown, ReadyzNotMember (removed), ReadyzNoLeader,
// ReadyzNoCommitIndex, ReadyzApplying (all three only until the node has
// caught up once) and ReadyzRecovering.
const (
	// ReadyzShutDown: the node's Raft has shut down.
	ReadyzShutDown = "shut_down"
	// ReadyzNotMember: the node is not in the Raft configuration (not yet
	// admitted, or removed).
	ReadyzNotMember = "not_member"
	// ReadyzNotVoter: the node is a non-voter, still being caught up
	// after a join.
	ReadyzNotVoter = "not_voter"
	// ReadyzNoLeader: no leader is known (an election, or no quorum).
	ReadyzNoLeader = "no_leader"
	// ReadyzNoCommitIndex: the node has not learned a commit index from
	// the leader yet (it restarted, and the leader's first append has not
	// come).
	ReadyzNoCommitIndex = "no_commit_index"
	// ReadyzApplying: the node has not applied up to the commit index
	// it knew when the request came, even after waiting.
	ReadyzApplying = "applying"
	// ReadyzRecovering: the node is still recovering its KV index from a
	// peer's dump (?for=selection only).
	ReadyzRecovering = "recovering"
)

// PartitionLoads is one partition of GET /loads.
type PartitionLoads struct {
	ModelName string     `json:"model_name"`
	TenantID  string     `json:"tenant_id"`
	Loads     []RankLoad `json:"loads"`
}

// RankLoad is one rank's active load.
type RankLoad struct {
	WorkerID            uint64  `json:"worker_id"`
	DPRank              uint32  `json:"dp_rank"`
	ActivePrefillTokens int64   `json:"active_prefill_tokens"`
	ActiveDecodeBlocks  float64 `json:"active_decode_blocks"`
	ActiveRequests      int     `json:"active_requests"`
	// Busy: the rank is over one of its model's busy thresholds (load
	// shedding); its worker is shed when all its ranks are.
	Busy bool `json:"busy"`
}

// PotentialLoad is one row of POST /potential_loads: a rank's load if the
// prompt were booked on it.
type PotentialLoad struct {
	WorkerID               uint64  `json:"worker_id"`
	DPRank                 uint32  `json:"dp_rank"`
	PotentialPrefillTokens int64   `json:"potential_prefill_tokens"`
	PotentialDecodeBlocks  float64 `json:"potential_decode_blocks"`
	ActiveRequests         int     `json:"active_requests"`
}

// OverlapScores answers POST /overlap_scores.
type OverlapScores struct {
	BlockSize uint32       `json:"block_size"`
	NumBlocks int          `json:"num_blocks"`
	Workers   []OverlapRow `json:"workers"`
}

// OverlapRow is one schedulable rank's tiered match, in blocks. As in
// Dynamo the tiers are cumulative: HostPinnedBlocks counts the device
// prefix plus the further blocks found on host, DiskBlocks adds the further
// ones found on disk, so DeviceBlocks ≤ HostPinnedBlocks ≤ DiskBlocks. The
// extension fields give the further blocks alone.
type OverlapRow struct {
	WorkerID                  uint64  `json:"worker_id"`
	DPRank                    uint32  `json:"dp_rank"`
	DeviceBlocks              uint32  `json:"device_blocks"`
	HostPinnedBlocks          uint32  `json:"host_pinned_blocks"`
	DiskBlocks                uint32  `json:"disk_blocks"`
	HostPinnedExtensionBlocks uint32  `json:"host_pinned_extension_blocks"`
	DiskExtensionBlocks       uint32  `json:"disk_extension_blocks"`
	CreditBlocks              float64 `json:"credit_blocks"`
}
