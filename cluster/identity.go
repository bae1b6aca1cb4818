package cluster

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/kvselect/kvselect/fsm"
)

// The cluster's identity and each node's epoch (SPEC §3.6, §11; DESIGN.md,
// Cluster id and epochs): what replica sync binds its messages to.

// NewIncarnation draws a process's incarnation: random, never 0 (0 is
// how a record without one reads).
func NewIncarnation() uint64 {
	var b [8]byte
	for {
		if _, err := rand.Read(b[:]); err != nil {
			panic(fmt.Sprintf("crypto/rand: %v", err))
		}
		if v := binary.LittleEndian.Uint64(b[:]); v != 0 {
			return v
		}
	}
}

// Incarnation is the random number this process drew at start and
// publishes in its node metadata; the FSM turns its first write into this
// node's epoch.
func (n *Node) Incarnation() uint64 { return n.incarnation }

// Epoch is this process's epoch: the Raft index at which the catalog
// recorded its incarnation, or 0 until the catalog this node applied has
// it (the write goes through the leader like any metadata).
func (n *Node) Epoch() uint64 { return EpochOf(n.Catalog(), n.cfg.NodeID, n.incarnation) }

// EpochOf is the epoch catalog c gives the process of node id with the
// given incarnation: 0 until c records that incarnation.
func EpochOf(c *fsm.Catalog, id string, incarnation uint64) uint64 {
	if m, ok := c.Node(id); ok && m.Incarnation == incarnation {
		return m.Epoch
	}
	return 0
}

// ClusterID is the cluster id of the catalog this node applied; zero until
// the first leader wrote one.
func (n *Node) ClusterID() fsm.ClusterID { return n.Catalog().ClusterID() }

// clusterIDPlan is what the leader does about the cluster id.
type clusterIDPlan int

const (
	idKeep   clusterIDPlan = iota // the catalog has one
	idCreate                      // a new cluster: draw one
	idCopy                        // this catalog lost it: copy it from a member
	idAsk                         // ask the members: copy theirs, or draw one if none has any
)

// planClusterID decides from the leader's catalog (self is the leader). A
// set_node that carries an incarnation is only ever written after the
// cluster id (putMetadata makes sure of it), so a catalog with an epoch and
// no id has lost the id: it was restored from a snapshot that a release
// before cluster ids wrote after skipping the entry, and the id is copied
// from a member. A catalog without epochs may be the same, for a release
// before ids drops incarnations too (a review found the split: a node
// restored from such a snapshot drew a second id, and replica sync between
// it and the rest stopped for good), or a cluster upgraded from it: with
// other members listed, they are asked, and an id is drawn only when every
// one of them answers without one. A catalog listing no other member is a
// new cluster: its first leader draws the id at once.
func planClusterID(c *fsm.Catalog, self string) clusterIDPlan {
	if !c.ClusterID().IsZero() {
		return idKeep
	}
	others := false
	for _, m := range c.Nodes() {
		if m.Epoch != 0 {
			return idCopy
		}
		others = others || m.ID != self
	}
	if others {
		return idAsk
	}
	return idCreate
}

// errNoClusterID: no member could tell the cluster id the leader lost (or
// some did not answer).
var errNoClusterID = errors.New("the catalog has no cluster id and no member reports one yet")

// errNoMemberHasID: every other member answered, and none has a cluster
// id; wraps errNoClusterID.
var errNoMemberHasID = fmt.Errorf("%w: every member answered without one", errNoClusterID)

// ensureClusterID gives the catalog a cluster id when it has none (leader
// only): the first entry a fresh cluster's first leader writes, and the
// first a leader of this release writes on a data dir of the release
// before. reassert writes the id the catalog holds again, so a follower
// whose catalog lost it gets it back (the leader does so when a node
// starts: that is when such a follower restored its snapshot).
func (n *Node) ensureClusterID(ctx context.Context, reassert bool) error {
	if !n.IsLeader() {
		return nil
	}
	if c := n.Catalog(); !c.ClusterID().IsZero() && !reassert {
		return nil // the common case, without a barrier
	}
	// Plan on a catalog with every committed entry of earlier terms: a
	// fresh leader's FSM may lag its commit index, and miss the id.
	if err := n.termBarrier(n.raft.CurrentTerm()); err != nil {
		return err
	}
	c := n.Catalog()
	var id fsm.ClusterID
	plan := planClusterID(c, n.cfg.NodeID)
	switch plan {
	case idKeep:
		if !reassert {
			return nil
		}
		id = c.ClusterID()
	case idCreate:
		if _, err := rand.Read(id[:]); err != nil {
			return fmt.Errorf("draw a cluster id: %w", err)
		}
	case idCopy, idAsk:
		var err error
		id, err = n.clusterIDFromMembers(ctx)
		switch {
		case plan == idAsk && errors.Is(err, errNoMemberHasID):
			if _, err := rand.Read(id[:]); err != nil {
				return fmt.Errorf("draw a cluster id: %w", err)
			}
		case err != nil:
			return err
		}
	}
	_, err := n.Apply(ctx, fsm.SetClusterID{ID: id})
	if errors.Is(err, fsm.ErrClusterIDSet) {
		return nil // another write got there first; the catalog has its id
	}
	if err == nil && !reassert {
		n.log.Info("cluster id written", "cluster_id", id)
	}
	if err == nil && plan == idCreate && n.bootstrapped && !n.cfg.NoCatalogRules {
		// A cluster this process bootstrapped: its members start on this
		// release, so the catalog rules are on from its first entries
		// (rules.go), before any worker. Should this fail, the gate of
		// ensureCatalogRules writes them once every member says it can.
		err = n.enableCatalogRules(ctx)
	}
	return err
}

// clusterIDFromMembers asks the other members for the cluster id their
// catalogs hold (GET /cluster/status, as the node itself). It fails with
// errNoMemberHasID when every one answered without one, and with
// errNoClusterID when some could not be asked.
func (n *Node) clusterIDFromMembers(ctx context.Context) (fsm.ClusterID, error) {
	unanswered := 0
	for _, m := range n.Catalog().Nodes() {
		if m.ID == n.cfg.NodeID {
			continue
		}
		if m.HTTPAddr == "" {
			unanswered++
			continue
		}
		addr := m.HTTPAddr
		if d, ok := n.cfg.PeerDial[m.ID]; ok && d.HTTP != "" {
			addr = d.HTTP
		}
		actx, cancel := context.WithTimeout(ctx, removalAskTimeout)
		st, err := n.client.status(actx, addr)
		cancel()
		if err != nil {
			unanswered++
			continue
		}
		if st.ClusterID == "" {
			continue
		}
		id, err := fsm.ParseClusterID(st.ClusterID)
		if err != nil {
			unanswered++
			continue
		}
		n.log.Warn("this catalog lost the cluster id (restored from a snapshot of an older release); copied it from a member",
			"cluster_id", id, "from", m.ID)
		return id, nil
	}
	if unanswered > 0 {
		return fsm.ClusterID{}, fmt.Errorf("%w (%d members did not answer)", errNoClusterID, unanswered)
	}
	return fsm.ClusterID{}, errNoMemberHasID
}
