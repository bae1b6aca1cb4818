package fsm

import "fmt"

// Catalog rules: how apply derives what the log's history alone tells.
// Rules 1 are the sticky block size (stickyBlockSize: a partition keeps its
// block size while any member holds it) and the retired partitions
// (known.go: a partition that lost its last worker is not_ready, not
// unknown_partition). Both read state an older binary neither keeps nor
// writes into snapshots, so a node of the release before, or a node of
// this release restoring a snapshot of that release, would derive another
// block size, other schedulable workers and another answer for an emptied
// partition than a node of this release that applied the log.
//
// The rules are therefore switched on by a log entry, EnableCatalogRules,
// as consul gates a feature on its servers' versions: before that entry
// every node applies the rules of the release before (the most senior
// worker's block size; no retired record, so a partition is never claimed
// unknown), from it on the new ones. A snapshot records the switch
// (catalog_rules); one without it (every snapshot of the release before)
// means rules 0, which is what a full replay of that release's log gives.
// At the switch nothing changes: the sticky sizes start from the sizes
// the partitions hold, and the retired record starts empty (so a
// partition emptied before the switch reads as unknown after it, as one
// forgotten past MaxRetiredPartitions does).
//
// The leader writes the entry only once every member of the Raft
// configuration advertises, in its node metadata (NodeMeta.CatalogRules),
// a release that knows the rules; a cluster this release bootstraps writes
// it right after its cluster id. The type has no IgnoreUnknown flag: a
// binary that skipped it would go on deriving the old way while every
// other node derived the new, so an older binary that meets it (one
// downgraded, or added after the switch) stops instead.

// CatalogRulesCurrent is the newest catalog rules this binary applies:
// the sticky block size and the retired partitions.
const CatalogRulesCurrent uint32 = 1

// CmdEnableCatalogRules switches the catalog to newer rules (rules.go).
const CmdEnableCatalogRules CommandType = 14

// EnableCatalogRules switches the catalog to rules Rules from its index
// on. Writing rules the catalog already has, or older ones, changes
// nothing.
type EnableCatalogRules struct {
	Rules uint32
}

func (EnableCatalogRules) Type() CommandType { return CmdEnableCatalogRules }

type enableCatalogRulesV1 struct {
	Rules uint32 `json:"rules"`
}

// CatalogRules are the rules the catalog applies: 0 until an
// EnableCatalogRules entry (or a snapshot that recorded one).
func (c *Catalog) CatalogRules() uint32 { return c.rules }

// stickyRules reports whether the sticky block size and the retired
// partitions apply.
func (c *Catalog) stickyRules() bool { return c.rules >= 1 }

func applyEnableCatalogRules(e *editor, payload []byte) (outcome, error) {
	v := decodePayload[enableCatalogRulesV1](CmdEnableCatalogRules, payload)
	switch {
	case v.Rules == 0:
		return outcome{}, &FieldError{"rules", "must be at least 1"}
	case v.Rules > CatalogRulesCurrent:
		// Skipping it would diverge from the nodes that know them, as an
		// unknown command would.
		panic(fmt.Sprintf("fsm: catalog rules %d at index %d; this kvselect applies rules up to %d (written by a newer kvselect?)",
			v.Rules, e.next.index, CatalogRulesCurrent))
	case v.Rules > e.next.rules:
		e.next.rules = v.Rules
	}
	return outcome{}, nil
}
