package indexer

import (
	"fmt"
)

// check recomputes every derived count of the index from scratch and
// compares it with the incrementally maintained one. Tests call it after
// each operation; it is O(index size).
func (ix *partIndex) check() error {
	free := map[nodeID]bool{}
	for _, id := range ix.nodes.free {
		if free[id] {
			return fmt.Errorf("node %d freed twice", id)
		}
		free[id] = true
	}
	var live []nodeID
	for id := nodeID(1); id < ix.nodes.next; id++ {
		if !free[id] {
			live = append(live, id)
		}
	}
	if len(live) != ix.live {
		return fmt.Errorf("live = %d, counted %d", ix.live, len(live))
	}
	if ix.byKey.Len() != ix.live {
		return fmt.Errorf("byKey has %d entries for %d live nodes", ix.byKey.Len(), ix.live)
	}
	levelOf := func(id nodeID, slot uint32) int {
		if id == noNode {
			return 0
		}
		n := ix.nodes.at(id)
		if hi := ix.holderIdx(n, slot); hi >= 0 {
			return level(ix.holders(n)[hi].tiers())
		}
		return noLevel
	}
	kids := map[nodeID]uint32{}
	covered := map[spillKey][noLevel]uint32{}
	var holes = map[uint32]*[noLevel]int64{}
	memberships := 0
	var tierBlocks [numTiers]int
	for _, id := range live {
		n := ix.nodes.at(id)
		if got, _ := ix.byKey.Get(n.key); got != id {
			return fmt.Errorf("byKey[%x] = %d, want %d", n.key, got, id)
		}
		if n.parent != noNode {
			if free[n.parent] || n.parent >= ix.nodes.next {
				return fmt.Errorf("node %d has dead parent %d", id, n.parent)
			}
			if want := ChainHash(ix.nodes.at(n.parent).key, n.local); want != n.key {
				return fmt.Errorf("node %d key is not its path hash", id)
			}
			kids[n.parent]++
		} else if n.key != n.local {
			return fmt.Errorf("depth-1 node %d key != local", id)
		}
		if n.hlen > 0 && (n.hclass == noRun || int(n.hlen) > 1<<n.hclass) {
			return fmt.Errorf("node %d has %d holders in class %d", id, n.hlen, n.hclass)
		}
		seen := map[uint32]bool{}
		for _, h := range ix.holders(n) {
			if seen[h.slot] {
				return fmt.Errorf("node %d has two holders for slot %d", id, h.slot)
			}
			seen[h.slot] = true
			if int(h.slot) >= len(ix.ranks) || ix.ranks[h.slot] == nil {
				return fmt.Errorf("node %d holder for dead slot %d", id, h.slot)
			}
			lv := level(h.tiers())
			if lv == noLevel {
				continue
			}
			memberships++
			for t := range numTiers {
				if h.tiers()&(1<<t) != 0 {
					tierBlocks[t]++
				}
			}
			if n.parent != noNode {
				k := spillKey{n.parent, h.slot}
				c := covered[k]
				c[lv]++
				covered[k] = c
			}
			hs := holes[h.slot]
			if hs == nil {
				hs = new([noLevel]int64)
				holes[h.slot] = hs
			}
			pl := levelOf(n.parent, h.slot)
			for l := lv; l < noLevel; l++ {
				if pl > l {
					hs[l]++
				}
			}
		}
	}
	for _, id := range live {
		n := ix.nodes.at(id)
		if n.kids != kids[id] {
			return fmt.Errorf("node %d kids = %d, counted %d", id, n.kids, kids[id])
		}
		if n.hlen == 0 && n.kids == 0 {
			return fmt.Errorf("node %d is empty but alive", id)
		}
		for i := range ix.holders(n) {
			h := &ix.holders(n)[i]
			got := ix.kidCounts(id, h)
			if want := covered[spillKey{id, h.slot}]; got != want {
				return fmt.Errorf("node %d slot %d child counts %v, counted %v", id, h.slot, got, want)
			}
			if h.tiers() == 0 && got == ([noLevel]uint32{}) {
				return fmt.Errorf("node %d slot %d holder is empty", id, h.slot)
			}
			delete(covered, spillKey{id, h.slot})
		}
	}
	if len(covered) != 0 {
		return fmt.Errorf("covered children without a parent holder: %v", covered)
	}
	if memberships != ix.memberships || tierBlocks != ix.tierBlocks {
		return fmt.Errorf("memberships %d %v, counted %d %v", ix.memberships, ix.tierBlocks, memberships, tierBlocks)
	}
	for slot, r := range ix.ranks {
		if r == nil {
			continue
		}
		var want [noLevel]int64
		if hs := holes[uint32(slot)]; hs != nil {
			want = *hs
		}
		if r.holes != want {
			return fmt.Errorf("rank %v holes %v, counted %v", r.key, r.holes, want)
		}
		var mask uint8
		for l := range noLevel {
			if want[l] == 0 {
				mask |= 1 << l
			}
		}
		if ix.clean[slot] != mask {
			return fmt.Errorf("rank %v clean mask %b, want %b", r.key, ix.clean[slot], mask)
		}
	}
	for k := range ix.spill {
		if free[k.node] {
			return fmt.Errorf("spill entry for dead node %d", k.node)
		}
	}
	return ix.checkEngineHashes(free)
}

// checkEngineHashes: every engine hash names a membership that holds a
// tier under it; every membership is named by exactly its hashes (one, or
// one plus its alias extras); alias sets match their holders.
func (ix *partIndex) checkEngineHashes(free map[nodeID]bool) error {
	for slot, r := range ix.ranks {
		if r == nil {
			continue
		}
		names := map[nodeID]int{}
		for h, id := range r.blocks.All() {
			if free[id] || id == noNode || id >= ix.nodes.next {
				return fmt.Errorf("rank %v engine hash %x names dead node %d", r.key, h, id)
			}
			if ix.hashTiers(r, id, h) == 0 {
				return fmt.Errorf("rank %v engine hash %x names node %d but holds no tier under it", r.key, h, id)
			}
			names[id]++
		}
		for id := nodeID(1); id < ix.nodes.next; id++ {
			if free[id] {
				continue
			}
			n := ix.nodes.at(id)
			hi := ix.holderIdx(n, uint32(slot))
			want := 0
			if hi >= 0 {
				h := ix.holders(n)[hi]
				k := spillKey{id, uint32(slot)}
				a, hasSet := ix.aliases[k]
				switch {
				case h.tiers() == 0 && (h.flags&aliased != 0 || hasSet):
					return fmt.Errorf("node %d slot %d: phantom holder with aliases", id, slot)
				case h.flags&aliased != 0 != hasSet:
					return fmt.Errorf("node %d slot %d: aliased flag %v, alias set %v", id, slot, h.flags&aliased != 0, hasSet)
				case hasSet:
					if len(a.extras) == 0 || a.primary == 0 || a.union() != h.tiers() {
						return fmt.Errorf("node %d slot %d: alias set %+v for tiers %b", id, slot, *a, h.tiers())
					}
					want = 1 + len(a.extras)
				case h.tiers() != 0:
					want = 1
				}
			}
			if names[id] != want {
				return fmt.Errorf("rank %v: node %d named by %d engine hashes, want %d", r.key, id, names[id], want)
			}
		}
	}
	for k := range ix.aliases {
		if free[k.node] {
			return fmt.Errorf("alias set for dead node %d", k.node)
		}
	}
	return nil
}
