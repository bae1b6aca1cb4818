package cluster

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/hashicorp/raft"

	"github.com/kvselect/kvselect/fsm"
)

// The catalog rules switch (fsm/rules.go; DESIGN.md, Catalog rules). Its
// entry has no IgnoreUnknown flag: a node of the release before stops at
// it. So the leader writes it only once every member of the Raft
// configuration, voter or not, advertises in its node metadata a binary
// that applies the rules. A member publishes that record itself on every
// start (publishMetadata), so a member of the release before, or one
// restarted on it, holds the switch back; so does a member without a
// record yet (one just admitted).

// membersWithoutRules returns, sorted, the members of servers whose
// record in c does not advertise rules (none when the switch may be
// written).
func membersWithoutRules(c *fsm.Catalog, servers []raft.Server, rules uint32) []string {
	var out []string
	for _, s := range servers {
		if m, ok := c.Node(string(s.ID)); !ok || m.CatalogRules < rules {
			out = append(out, string(s.ID))
		}
	}
	slices.Sort(out)
	return out
}

// ensureCatalogRules writes the switch (leader only) when the catalog
// lacks it and every member advertises it. It logs, once per change, which
// members hold it back.
func (n *Node) ensureCatalogRules(ctx context.Context) error {
	if !n.IsLeader() || n.cfg.NoCatalogRules || n.Catalog().CatalogRules() >= fsm.CatalogRulesCurrent {
		return nil
	}
	ready := func() (bool, error) {
		servers, err := n.servers()
		if err != nil {
			return false, err
		}
		missing := membersWithoutRules(n.Catalog(), servers, fsm.CatalogRulesCurrent)
		if held := strings.Join(missing, ","); held != n.rulesHeldBy {
			n.rulesHeldBy = held
			if held != "" {
				n.log.Info("catalog rules stay off until every member runs this release", "waiting_for", missing)
			}
		}
		return len(missing) == 0, nil
	}
	if ok, err := ready(); !ok || err != nil {
		return err
	}
	// Judge again on a catalog with every entry of earlier terms: a
	// fresh leader's FSM may lag, and miss a member's newer record (one
	// restarted on the release before).
	if err := n.termBarrier(n.raft.CurrentTerm()); err != nil {
		return err
	}
	if n.Catalog().CatalogRules() >= fsm.CatalogRulesCurrent {
		return nil
	}
	if ok, err := ready(); !ok || err != nil {
		return err
	}
	return n.enableCatalogRules(ctx)
}

// enableCatalogRules writes the switch.
func (n *Node) enableCatalogRules(ctx context.Context) error {
	res, err := n.Apply(ctx, fsm.EnableCatalogRules{Rules: fsm.CatalogRulesCurrent})
	if err != nil {
		return fmt.Errorf("switch the catalog rules on: %w", err)
	}
	n.log.Info("catalog rules switched on: sticky block sizes, retired partitions", "rules", fsm.CatalogRulesCurrent,
		"index", res.Index)
	return nil
}
