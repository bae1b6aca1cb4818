package cluster

import (
	"cmp"
	"slices"

	"github.com/kvselect/kvselect/fsm"
)

// PeerAddr is another member of the Raft configuration, as this node
// reaches its HTTP API.
type PeerAddr struct {
	ID string
	// HTTPAddr is host:port where this node dials the member's API: the
	// --peer-dial override, else the member's published metadata; ""
	// while neither is known.
	HTTPAddr string
}

// OtherMembers lists the members of the Raft configuration other than
// this node, sorted by id. The configuration is known as soon as the node
// is open (from its own log, a bootstrap or a join), before the catalog
// holds every member's metadata: a member without an address yet is
// listed with HTTPAddr "".
func (n *Node) OtherMembers() ([]PeerAddr, error) {
	servers, err := n.servers()
	if err != nil {
		return nil, err
	}
	catalog := n.Catalog()
	var out []PeerAddr
	for _, s := range servers {
		id := string(s.ID)
		if id == n.cfg.NodeID {
			continue
		}
		out = append(out, PeerAddr{ID: id, HTTPAddr: n.httpAddrIn(catalog, id)})
	}
	slices.SortFunc(out, func(a, b PeerAddr) int { return cmp.Compare(a.ID, b.ID) })
	return out, nil
}

// Changes returns channels closed at the next leader change and at the
// next catalog change (node metadata included). Take them before reading
// the state they guard. A dropped leader observation delays the first, so
// a waiter should also poll now and then.
func (n *Node) Changes() (leader, catalog <-chan struct{}) { return n.changes() }

// httpAddr is where this node dials member id's HTTP API: the --peer-dial
// override, else the member's published metadata; "" while neither is
// known.
func (n *Node) httpAddr(id string) string { return n.httpAddrIn(n.Catalog(), id) }

func (n *Node) httpAddrIn(catalog *fsm.Catalog, id string) string {
	if d, ok := n.cfg.PeerDial[id]; ok && d.HTTP != "" {
		return d.HTTP
	}
	if m, ok := catalog.Node(id); ok {
		return m.HTTPAddr
	}
	return ""
}
