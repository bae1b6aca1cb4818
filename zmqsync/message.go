package zmqsync

import (
	"encoding/hex"

	"github.com/kvselect/kvselect/scheduler/replica"
)

// ClusterID is the cluster's identity (fsm.ClusterID), to which v2
// messages are bound.
type ClusterID [16]byte

// IsZero reports whether the id is unset.
func (id ClusterID) IsZero() bool { return id == ClusterID{} }

func (id ClusterID) String() string { return hex.EncodeToString(id[:]) }

// Message is what one PUB send carries: the events one node published
// since its last send, in order.
type Message struct {
	// Version is the schema the message is encoded in (Version or
	// PreviousVersion); 0 means Version.
	Version int
	// Origin is the publishing node's id; a node drops its own echoes.
	Origin string
	// ClusterID, Epoch and Counter (v2) bind the message to its cluster
	// and number it: Epoch is the publisher's epoch (its start) and
	// Counter counts its messages within it, from 1.
	ClusterID ClusterID
	Epoch     uint64
	Counter   uint64
	Events    []replica.Event
}
