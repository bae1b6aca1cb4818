package indexer

// compactMinNodes is the high-water mark below which compaction is not
// worth it: a small partition's slack is a few hundred kilobytes at most.
const compactMinNodes = 1 << 14

// maybeCompact releases memory after a partition has shrunk: when fewer
// than a quarter of the node ids ever handed out are live, it rebuilds the
// arena, the holder pool and every map at the live size. Freed nodes and
// holder runs are otherwise only reused, and Go maps never shrink, so
// without it a partition would keep the memory of its peak forever.
//
// Each rebuild is O(live) and happens only after the partition lost three
// quarters of its peak, so its cost is amortised over those removals. It
// keeps matches out only while the new storage is swapped in: it is built
// from the old, which matches go on reading meanwhile.
func (ix *partIndex) maybeCompact() bool {
	if hw := int(ix.nodes.next); hw < compactMinNodes || ix.live*4 >= hw {
		return false
	}
	ix.compact()
	return true
}

// compact rebuilds the index in fresh storage, keeping every node, holder,
// child count, engine hash and alias set; only node ids change.
func (ix *partIndex) compact() {
	ix.steps.release()
	old := ix.nodes
	free := make([]bool, old.next)
	for _, id := range old.free {
		free[id] = true
	}
	remap := make([]nodeID, old.next)
	var nodes arena
	for id := nodeID(1); id < old.next; id++ {
		if !free[id] {
			remap[id] = nodes.alloc()
		}
	}
	var pool holderPool
	byKey := newKeyTable(&ix.nodes, ix.live) // filled without reading a node: no growth
	spill := make(map[spillKey][noLevel]uint32, len(ix.spill))
	aliases := make(map[spillKey]*aliasSet, len(ix.aliases))
	for id := nodeID(1); id < old.next; id++ {
		nid := remap[id]
		if nid == noNode {
			continue
		}
		n := old.at(id)
		nn := nodes.at(nid)
		*nn = node{key: n.key, local: n.local, parent: remap[n.parent], kids: n.kids, hclass: noRun}
		if hs := ix.holders(n); len(hs) > 0 {
			nn.hclass = classFor(len(hs))
			nn.hrun = pool.alloc(nn.hclass)
			nn.hlen = uint16(len(hs))
			copy(pool.run(nn.hclass, nn.hrun), hs)
			for _, h := range hs {
				if h.flags&kidsSpill != 0 {
					spill[spillKey{nid, h.slot}] = ix.spill[spillKey{id, h.slot}]
				}
				if h.flags&aliased != 0 {
					aliases[spillKey{nid, h.slot}] = ix.aliases[spillKey{id, h.slot}]
				}
			}
		}
		byKey.Put(n.key, nid)
	}
	blocks := make([]hashTable, len(ix.ranks))
	for slot, r := range ix.ranks {
		if r == nil {
			continue
		}
		for h, id := range r.blocks.All() {
			blocks[slot].Put(h, remap[id])
		}
	}
	ix.steps.change()
	for slot, r := range ix.ranks {
		if r != nil {
			r.blocks = blocks[slot]
		}
	}
	ix.nodes, ix.pool, ix.byKey, ix.spill, ix.aliases = nodes, pool, byKey, spill, aliases
}
