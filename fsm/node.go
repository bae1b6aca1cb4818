package fsm

import (
	"cmp"
	"fmt"
	"maps"
	"net"
	"net/url"
	"slices"
)

// NodeMeta is what the cluster knows about one selector node besides its
// Raft membership: the addresses other nodes and clients use to reach it.
// Raft's configuration holds ids and Raft addresses only; the metadata
// travels through the log so every node can find the leader's HTTP address
// and every member's replica-sync endpoint.
type NodeMeta struct {
	ID string
	// HTTPAddr is host:port of the node's API, as others should dial it.
	HTTPAddr string
	// ReplicaSync is the node's ZMQ replica-sync endpoint (tcp://host:port),
	// empty when replica sync is off.
	ReplicaSync string
	// ModifyIndex is the Raft index of the last change.
	ModifyIndex uint64
	// Incarnation identifies the process that wrote the record: a random
	// number each node draws when it starts, outside the FSM. 0 from a
	// writer that does not know incarnations (an operator's join, a
	// release before epochs), which keeps the record's incarnation and
	// epoch as they were.
	Incarnation uint64
	// Epoch (derived) is the Raft index at which the node's current
	// incarnation was first written: it grows at every start of the
	// node and never repeats, not even for a node removed and added
	// again, since log indexes do not. 0 until a node of this release
	// published an incarnation. Replica sync accepts a node's messages
	// only from its current epoch (SPEC §3.6).
	Epoch uint64
	// CatalogRules are the newest catalog rules (rules.go) the binary of
	// the process that wrote the record applies: how a member advertises
	// that the leader may switch them on. 0 from a release before them,
	// which drops the field. It belongs to the incarnation: a writer that
	// knows none keeps the record's.
	CatalogRules uint32
}

// ValidateNode checks a node record the way ValidateSpec checks a worker.
func ValidateNode(n *NodeMeta) error {
	if n.ID == "" {
		return &FieldError{"id", "required"}
	}
	if len(n.ID) > MaxStringLen {
		return &FieldError{"id", fmt.Sprintf("longer than %d bytes", MaxStringLen)}
	}
	if _, port, err := net.SplitHostPort(n.HTTPAddr); err != nil || port == "" || len(n.HTTPAddr) > MaxStringLen {
		return &FieldError{"http_addr", fmt.Sprintf("%q is not host:port", n.HTTPAddr)}
	}
	if n.ReplicaSync != "" {
		u, err := url.Parse(n.ReplicaSync)
		if err != nil || u.Scheme != "tcp" || u.Host == "" || len(n.ReplicaSync) > MaxStringLen {
			return &FieldError{"replica_sync", fmt.Sprintf("%q is not tcp://host:port", n.ReplicaSync)}
		}
	}
	return nil
}

// Node returns the metadata of the node with the given id.
func (c *Catalog) Node(id string) (NodeMeta, bool) {
	n, ok := c.nodes[id]
	return n, ok
}

// Nodes returns every node's metadata sorted by id.
func (c *Catalog) Nodes() []NodeMeta {
	out := slices.Collect(maps.Values(c.nodes))
	slices.SortFunc(out, func(a, b NodeMeta) int { return cmp.Compare(a.ID, b.ID) })
	return out
}

func applySetNode(e *editor, payload []byte) (outcome, error) {
	n := decodePayload[setNodeV1](CmdSetNode, payload).Node.decode(false)
	if err := ValidateNode(&n); err != nil {
		return outcome{}, err
	}
	n.ModifyIndex = e.next.index
	old, had := e.next.nodes[n.ID]
	switch {
	case n.Incarnation == 0 && had:
		// A writer that does not know incarnations changes addresses
		// only.
		n.Incarnation, n.Epoch, n.CatalogRules = old.Incarnation, old.Epoch, old.CatalogRules
	case n.Incarnation == 0:
	case had && n.Incarnation == old.Incarnation:
		n.Epoch = old.Epoch // the same process again (a retried write)
	default:
		n.Epoch = e.next.index // a new start of the node
	}
	e.setNode(n)
	return outcome{}, nil
}

func applyDeleteNode(e *editor, payload []byte) (outcome, error) {
	cmd := decodePayload[deleteNodeV1](CmdDeleteNode, payload)
	if _, ok := e.next.nodes[cmd.ID]; !ok {
		return outcome{}, fmt.Errorf("%w: %q", ErrNodeNotFound, cmd.ID)
	}
	e.deleteNode(cmd.ID)
	return outcome{}, nil
}
