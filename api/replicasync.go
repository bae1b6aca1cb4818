package api

// Replica-sync peers (SPEC §3.6): the ZMQ endpoints a node subscribes to
// for the other nodes' admissions, prefill completions and frees.

// ReplicaSyncPeerRequest is the body of POST /replica_sync/register_peer
// and /replica_sync/deregister_peer.
type ReplicaSyncPeerRequest struct {
	// Endpoint is a peer's replica-sync PUB endpoint, tcp://host:port.
	Endpoint string `json:"endpoint"`
}

// ReplicaSyncPeerAck answers register_peer (201 new, 200 already there)
// and deregister_peer (200).
type ReplicaSyncPeerAck struct {
	Status   string `json:"status"`
	Endpoint string `json:"endpoint"`
}

// Sources of a replica-sync peer: why the node subscribes to it.
const (
	PeerSourceFlag       = "flag"       // --replica-sync-peers
	PeerSourceRegistered = "registered" // POST /replica_sync/register_peer
	PeerSourceMember     = "member"     // a cluster member's metadata
	PeerSourceDeparted   = "departed"   // a member that left the cluster, followed a while (zmqsync.DefaultDepartedLinger)
)

// GET /replica_sync/peers answers the sorted list of the endpoints the
// node subscribes to, a bare JSON array of strings exactly as Dynamo
// answers it ([] when replica sync is off), so Dynamo's clients read it;
// GET /replica_sync/status has the details.

// ReplicaSyncStatus is GET /replica_sync/status.
type ReplicaSyncStatus struct {
	// Enabled is false on a node without replica sync; nothing else is
	// set then.
	Enabled bool `json:"enabled"`
	// Endpoint is this node's own replica-sync endpoint as it advertises
	// it to the cluster.
	Endpoint string `json:"endpoint,omitempty"`
	// Peers describe each endpoint the node subscribes to, sorted.
	Peers []ReplicaSyncPeer `json:"peers"`
}

// ReplicaSyncPeer is one subscription.
type ReplicaSyncPeer struct {
	Endpoint string `json:"endpoint"`
	// Dial is the address actually dialed (--peer-dial may differ).
	Dial string `json:"dial"`
	// NodeID names the cluster member behind the endpoint, when it is one.
	NodeID  string   `json:"node_id,omitempty"`
	Sources []string `json:"sources"`
	// State is connecting, active or failed (LastError says why).
	State     string `json:"state"`
	LastError string `json:"last_error,omitempty"`
	// Messages and Events count what arrived; DroppedEvents what this node
	// did not apply (unknown worker, duplicate id, ...).
	Messages      uint64 `json:"messages"`
	Events        uint64 `json:"events"`
	DroppedEvents uint64 `json:"dropped_events"`
}
