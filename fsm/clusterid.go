package fsm

import (
	"encoding/hex"
	"fmt"
)

// ClusterID is the cluster's identity: 128 random bits chosen once, by the
// first leader that finds the catalog without one, and kept in the catalog
// and its snapshots (SPEC §11). Replica sync binds its messages to it, so
// that two clusters sharing a token never accept each other's. The FSM
// never draws it: the leader generates it outside and writes it in a
// SetClusterID command.
type ClusterID [16]byte

// IsZero reports whether the id is unset.
func (id ClusterID) IsZero() bool { return id == ClusterID{} }

// String is the id as 32 lowercase hex digits, "" when unset.
func (id ClusterID) String() string {
	if id.IsZero() {
		return ""
	}
	return hex.EncodeToString(id[:])
}

// ParseClusterID reads 32 hex digits; the zero id is refused.
func ParseClusterID(s string) (ClusterID, error) {
	var id ClusterID
	if len(s) != 2*len(id) {
		return ClusterID{}, &FieldError{"cluster_id", fmt.Sprintf("%d characters, want %d hex digits", len(s), 2*len(id))}
	}
	if _, err := hex.Decode(id[:], []byte(s)); err != nil {
		return ClusterID{}, &FieldError{"cluster_id", "not hex"}
	}
	if id.IsZero() {
		return ClusterID{}, &FieldError{"cluster_id", "all zero"}
	}
	return id, nil
}

// SetClusterID gives the catalog its cluster id unless it has one: the
// first write wins, on every node alike. Writing the id the catalog holds
// again is how a leader re-asserts it (cluster/DESIGN.md, Cluster id): a
// node whose catalog lost it (restored from a snapshot that a release
// before cluster ids wrote, having skipped the entry) gets it back, and
// every other node changes nothing.
//
// The type carries the IgnoreUnknown flag: a node of a release before
// cluster ids skips it and runs on without an id, which it never reads.
type SetClusterID struct {
	ID ClusterID
}

func (SetClusterID) Type() CommandType { return CmdSetClusterID | IgnoreUnknown }

// ClusterID is the catalog's cluster id; zero until one was written.
func (c *Catalog) ClusterID() ClusterID { return c.clusterID }

func applySetClusterID(e *editor, payload []byte) (outcome, error) {
	v := decodePayload[setClusterIDV1](CmdSetClusterID, payload)
	id, err := ParseClusterID(v.ClusterID)
	if err != nil {
		return outcome{}, err
	}
	switch cur := e.next.clusterID; {
	case cur.IsZero():
		e.next.clusterID = id
	case cur != id:
		return outcome{}, fmt.Errorf("%w: the cluster is %s", ErrClusterIDSet, cur)
	}
	return outcome{}, nil
}
