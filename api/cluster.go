package api

// Raft states a node reports.
const (
	StateLeader    = "leader"
	StateFollower  = "follower"
	StateCandidate = "candidate"
	StateShutdown  = "shutdown"
)

// Suffrages of a member, as hashicorp/raft names them.
const (
	SuffrageVoter    = "Voter"
	SuffrageNonvoter = "Nonvoter"
	SuffrageStaging  = "Staging"
)

// ClusterStatus answers GET /cluster/status and every /cluster write.
type ClusterStatus struct {
	NodeID string `json:"node_id"`
	// ClusterID is the cluster's random 128-bit identity in hex, written
	// by the first leader and kept in the catalog; "" until then.
	ClusterID string    `json:"cluster_id"`
	State     string    `json:"state"`
	Term      uint64    `json:"term"`
	Leader    LeaderRef `json:"leader"`
	// CommitIndex and AppliedIndex are Raft's (they count configuration
	// and no-op entries too). CatalogIndex is the index of the last
	// catalog write this node has applied, side effects included: the
	// index min_catalog_index and X-Kvselect-Index compare against.
	CommitIndex  uint64 `json:"commit_index"`
	AppliedIndex uint64 `json:"applied_index"`
	CatalogIndex uint64 `json:"catalog_index"`
	// ConfigIndex is the log index of the configuration Members lists, or
	// a later index when that entry is not among the last 64 (an upper
	// bound either way). The configuration is committed once CommitIndex
	// reaches it. A node that never received the entry removing it learns
	// of its removal from this.
	ConfigIndex uint64 `json:"config_index"`
	// LastContactMs is a follower's time since it last heard from the
	// leader (-1: never; 0 on the leader).
	LastContactMs int64    `json:"last_contact_ms"`
	Members       []Member `json:"members"`
}

// LeaderRef identifies the leader; empty fields when none is known.
type LeaderRef struct {
	ID       string `json:"id"`
	HTTPAddr string `json:"http_addr"`
}

// Member is one server of the Raft configuration.
type Member struct {
	ID       string `json:"id"`
	RaftAddr string `json:"raft_addr"`
	HTTPAddr string `json:"http_addr"`
	Suffrage string `json:"suffrage"`
	// Reachable is the answering node's view: the leader tracks every
	// follower's heartbeats; a follower can only judge the leader.
	Reachable bool `json:"reachable"`
	// Epoch is the member's epoch in the catalog: the Raft index at which
	// its current process recorded itself. It grows at every start of the
	// node; 0 until a node of this release published one.
	Epoch uint64 `json:"epoch"`
}

// JoinRequest is the body of POST /cluster/join: the new member's id and
// Raft address, and the metadata to publish for it.
type JoinRequest struct {
	ID          string `json:"id"`
	RaftAddr    string `json:"raft_addr"`
	HTTPAddr    string `json:"http_addr,omitempty"`
	ReplicaSync string `json:"replica_sync,omitempty"`
	// CaughtUp is sent by the joining node itself once it holds the
	// configuration that lists it; only then is it made a voter.
	CaughtUp bool `json:"caught_up,omitempty"`
}

// RemoveRequest is the body of POST /cluster/remove.
type RemoveRequest struct {
	ID string `json:"id"`
}

// NodeMeta is the body and answer of POST /cluster/metadata: how a member
// publishes its own addresses.
type NodeMeta struct {
	ID          string `json:"id"`
	HTTPAddr    string `json:"http_addr"`
	ReplicaSync string `json:"replica_sync,omitempty"`
	ModifyIndex uint64 `json:"modify_index,omitempty"`
	// Incarnation is the random number the member's process drew at
	// start; its first write gives the member a new epoch. Omitted by a
	// writer that knows none (the record's stays).
	Incarnation uint64 `json:"incarnation,omitempty"`
	// CatalogRules are the newest catalog rules the member's binary
	// applies; the leader switches them on once every member has them.
	// Sent only to a leader that knows the field (a leader of the release
	// before refuses it as unknown).
	CatalogRules uint32 `json:"catalog_rules,omitempty"`
}

// Redirect is the body of a 307 to the leader (?redirect=true).
type Redirect struct {
	Leader   string `json:"leader"`
	Location string `json:"location"`
}
