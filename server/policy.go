package server

import (
	"context"
	"maps"
	"time"

	"github.com/kvselect/kvselect/fsm"
	"github.com/kvselect/kvselect/scheduler"
)

// Selection policies as catalog state (SPEC §6.4): the catalog's entries
// reach the scheduler from applyCatalogChange, and --policy seeds the
// cluster default once, when the cluster starts.

// catalogPolicies is the catalog's policy entries as the scheduler takes
// them, the cluster default under {scheduler.AnyModel, ""}.
func catalogPolicies(c *fsm.Catalog) map[fsm.PartitionKey]scheduler.PolicySpec {
	ps := c.Policies()
	out := make(map[fsm.PartitionKey]scheduler.PolicySpec, len(ps))
	for _, p := range ps {
		// A copy: the catalog's maps are shared by every catalog that
		// holds the entry, and never modified.
		out[p.Key] = scheduler.PolicySpec{Name: p.Name, Params: maps.Clone(p.Params)}
	}
	return out
}

// seedPolicyEvery is how often a bootstrapping node looks again when
// nothing kicked it (a backstop for a missed leader or catalog change).
const seedPolicyEvery = time.Second

// runSeedPolicy writes the node's --policy as the cluster default
// (fsm.InitPolicy) on a node that bootstrapped the cluster, once it leads.
// It ends when the catalog says a cluster default was ever written: by
// this node, by another node that bootstrapped the same cluster
// (--initial-cluster), or by an operator first. The FSM applies the seed
// only while that is not so, so a stale or duplicate one changes nothing,
// and an operator's DELETE of the default sticks. A node that joined or
// resumed never runs it: --policy seeds the catalog at bootstrap only.
func (s *Server) runSeedPolicy() {
	defer s.wg.Done()
	tick := time.NewTicker(seedPolicyEvery)
	defer tick.Stop()
	ctx, cancel := s.untilStop()
	defer cancel()
	spec := s.cfg.Scheduler.Policy
	for {
		leaderCh, catalogCh := s.Node.Changes()
		if s.Node.Catalog().DefaultPolicySeeded() {
			return
		}
		// After the cluster id, which stays a new cluster's first entry
		// (SPEC §11): the leader writes it as soon as it leads.
		if s.Node.IsLeader() && !s.Node.ClusterID().IsZero() {
			actx, acancel := context.WithTimeout(ctx, 10*time.Second)
			res, err := s.Node.Apply(actx, fsm.InitPolicy{Name: spec.Name, Params: spec.Params})
			acancel()
			if err == nil {
				if res.Policy != nil && res.Policy.ModifyIndex == res.Index {
					s.log.Info("cluster default selection policy seeded from --policy", "policy", spec.String(),
						"catalog_index", res.Index)
				}
				return
			}
			s.log.Warn("could not seed the cluster default selection policy; will retry", "policy", spec.String(), "err", err)
		}
		select {
		case <-s.stop:
			return
		case <-leaderCh:
		case <-catalogCh:
		case <-tick.C:
		}
	}
}
