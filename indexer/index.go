package indexer

import (
	"slices"

	"github.com/kvselect/kvselect/fsm"
)

// This file holds the prefix index of one partition. See DESIGN.md for the
// invariants; in short:
//
//   - A node is one block at one position: its key is the sequence hash of
//     the local block hashes on its path (ChainHash), so the index is a tree
//     stored in one flat map (byKey) and a query can jump to any depth.
//   - A node lives while it has a holder or a child (kids > 0); freeing a
//     node may free its now-empty ancestors.
//   - A holder is one rank's entry at a node: the tiers it holds the block
//     on, plus how many of the node's children that rank covers, by level.
//     A holder with no tiers but covered children is a "phantom": it exists
//     only to carry those counts.
//   - level(r, N) is 0 if r holds N on device, 1 if on host (not device), 2
//     if on disk only, 3 if not at all. "r covers N at level L" means
//     level(r, N) <= L, so level L=0 is device, 1 device∪host, 2 any tier.
//   - holes[L] of a rank counts nodes it covers at L whose parent it does
//     not cover at L. A rank with no holes at L covers a prefix-closed set
//     at L; matching exploits that (match.go).
//
// partIndex is not safe for concurrent use; Indexer guards it. A writer
// calls steps.change before every change a match could see, so that
// matches run between bounded steps of a long change (locking.go).

type nodeID uint32

const (
	noNode    nodeID = 0 // the virtual root; never allocated
	tierMask  uint8  = 1<<numTiers - 1
	kidsSpill uint8  = 1 << 7 // holder's child counts live in partIndex.spill (bit 6: aliased)
	noLevel          = 3
	allClean  uint8  = 1<<noLevel - 1
)

// node is 32 bytes and holds no pointers; its holders live in the pool.
type node struct {
	key    uint64 // sequence hash of the path
	local  uint64 // local block hash
	parent nodeID
	kids   uint32 // structural children
	hrun   uint32 // holder run in the pool
	hlen   uint16 // holders in use
	hclass uint8  // pool class of the run; noRun without holders
	_      uint8
}

// holder is 12 bytes. Child counts beyond uint16 move to partIndex.spill,
// which keeps them exact for any fan-out.
type holder struct {
	slot  uint32
	flags uint8 // tiers in the low bits, kidsSpill
	_     uint8
	kid   [noLevel]uint16 // covered children by their exact level
}

func (h *holder) tiers() uint8 { return h.flags & tierMask }

// level maps a tier set to the lowest level that covers it.
func level(tiers uint8) int {
	switch {
	case tiers&(1<<TierDevice) != 0:
		return 0
	case tiers&(1<<TierHost) != 0:
		return 1
	case tiers&(1<<TierDisk) != 0:
		return 2
	}
	return noLevel
}

type spillKey struct {
	node nodeID
	slot uint32
}

// rankState is one (worker, rank) of the partition.
type rankState struct {
	key    RankKey
	slot   uint32
	blocks hashTable // engine hash → node
	holes  [noLevel]int64
	// seq is the sequence number of the last batch applied for this rank;
	// valid when hasSeq. It is the rank's watermark in /dump.
	seq    uint64
	hasSeq bool
}

const (
	chunkBits = 12
	chunkSize = 1 << chunkBits
)

// arena allocates nodes in fixed chunks so that growth never copies nodes
// and node pointers stay valid. Freed ids are reused first.
type arena struct {
	chunks [][]node
	next   nodeID // next never-used id
	free   []nodeID
}

func (a *arena) at(id nodeID) *node { return &a.chunks[id>>chunkBits][id&(chunkSize-1)] }

func (a *arena) alloc() nodeID {
	if n := len(a.free); n > 0 {
		id := a.free[n-1]
		a.free = a.free[:n-1]
		return id
	}
	if a.next == 0 {
		a.next = 1 // id 0 is the root
	}
	id := a.next
	if int(id>>chunkBits) == len(a.chunks) {
		a.chunks = append(a.chunks, make([]node, chunkSize))
	}
	a.next++
	return id
}

func (a *arena) release(id nodeID) {
	*a.at(id) = node{hclass: noRun}
	a.free = append(a.free, id)
}

// partIndex is the prefix index of one partition.
type partIndex struct {
	nodes     arena
	pool      holderPool
	live      int      // allocated nodes
	byKey     keyTable // path key → node
	spill     map[spillKey][noLevel]uint32
	aliases   map[spillKey]*aliasSet // memberships named by several engine hashes
	ranks     []*rankState           // by slot; nil for free slots
	freeSlots []uint32
	byRank    map[RankKey]*rankState
	// order lists the live slots by (worker, rank), so that match can emit
	// results sorted without sorting them.
	order []uint32
	// found is checkStored's scratch: the node of each block of the event
	// being applied, noNode for new ones.
	found []nodeID
	// clean[slot] has bit l set when the rank has no holes at level l; it
	// mirrors rankState.holes in a dense array for the match loop.
	clean       []uint8
	memberships int
	tierBlocks  [numTiers]int // (node, rank) memberships per tier
	steps       writeSteps
}

func newPartIndex() *partIndex {
	ix := &partIndex{
		spill:   map[spillKey][noLevel]uint32{},
		aliases: map[spillKey]*aliasSet{},
		byRank:  map[RankKey]*rankState{},
	}
	ix.byKey = newKeyTable(&ix.nodes, 0)
	return ix
}

// addRank registers a rank; events for unregistered ranks are dropped. It
// returns nil past fsm.MaxRanksPerPartition ranks, which keeps every
// node's holder count within its uint16.
func (ix *partIndex) addRank(k RankKey) *rankState {
	if r, ok := ix.byRank[k]; ok {
		return r
	}
	if len(ix.byRank) >= fsm.MaxRanksPerPartition {
		return nil
	}
	ix.steps.change()
	r := &rankState{key: k}
	if n := len(ix.freeSlots); n > 0 {
		r.slot = ix.freeSlots[n-1]
		ix.freeSlots = ix.freeSlots[:n-1]
		ix.ranks[r.slot] = r
		ix.clean[r.slot] = allClean
	} else {
		r.slot = uint32(len(ix.ranks))
		ix.ranks = append(ix.ranks, r)
		ix.clean = append(ix.clean, allClean)
	}
	ix.byRank[k] = r
	i, _ := slices.BinarySearchFunc(ix.order, k, func(slot uint32, k RankKey) int {
		return compareRankKeys(ix.ranks[slot].key, k)
	})
	ix.order = slices.Insert(ix.order, i, r.slot)
	return r
}

// removeRank drops every block of the rank and frees its slot.
func (ix *partIndex) removeRank(k RankKey) {
	r, ok := ix.byRank[k]
	if !ok {
		return
	}
	ix.clearRank(r)
	ix.steps.change()
	delete(ix.byRank, k)
	ix.order = slices.DeleteFunc(ix.order, func(slot uint32) bool { return slot == r.slot })
	ix.ranks[r.slot] = nil
	ix.freeSlots = append(ix.freeSlots, r.slot)
}

// clearRank removes all of the rank's memberships (AllBlocksCleared).
func (ix *partIndex) clearRank(r *rankState) int {
	n := 0
	// removeHash deletes from the table, which must not change under
	// its iterator: take the hashes first.
	hashes := make([]uint64, 0, r.blocks.Len())
	for h := range r.blocks.All() {
		hashes = append(hashes, h)
	}
	for _, hash := range hashes {
		if ix.removeHash(r, hash, tierMask) {
			n++
		}
	}
	r.blocks = hashTable{} // releases the slots, which never shrink
	return n
}

// applyEvent applies one event for rank r. An event is applied whole or
// not at all.
func (ix *partIndex) applyEvent(r *rankState, ev *Event, st *ApplyStats) Outcome {
	if ev.Tier >= numTiers {
		return OutcomeInvalid
	}
	switch ev.Kind {
	case EventStored:
		if o := ix.checkStored(r, ev); o != OutcomeOK {
			return o
		}
		ix.applyStored(r, ev, st)
		return OutcomeOK
	case EventRemoved:
		for _, h := range ev.Hashes {
			if ix.removeHash(r, h, 1<<ev.Tier) {
				st.BlocksRemoved++
			} else {
				st.BlocksNotFound++
			}
		}
		return OutcomeOK
	case EventCleared:
		st.BlocksRemoved += ix.clearRank(r)
		return OutcomeOK
	}
	return OutcomeInvalid
}

// checkStored decides a stored event's fate before anything changes: its
// parent must be known to the rank; its chain must fit the tree (once a
// block is new, so are the ones after it, and an existing node must have
// the block's tokens and parent); an engine hash may appear once; and no
// block may be named by the engine hash of its own parent. It leaves the
// node of every existing block in ix.found for applyStored.
func (ix *partIndex) checkStored(r *rankState, ev *Event) Outcome {
	ix.found = ix.found[:0]
	parent := noNode
	if ev.HasParent {
		id, ok := r.blocks.Get(ev.Parent)
		if !ok {
			return OutcomeParentNotFound
		}
		parent = id
	}
	var key uint64
	if parent != noNode {
		key = ix.nodes.at(parent).key
	}
	if hasDuplicateHash(ev.Blocks) {
		return OutcomeInvalid
	}
	fresh := false // the chain has left the existing tree
	for i, b := range ev.Blocks {
		if i == 0 && parent == noNode {
			key = b.Local
		} else {
			key = ChainHash(key, b.Local)
		}
		id, exists := ix.byKey.Get(key)
		switch {
		case exists && fresh:
			return OutcomeHashCollision
		case exists:
			if n := ix.nodes.at(id); n.local != b.Local || n.parent != parent {
				return OutcomeHashCollision
			}
		default:
			fresh, id = true, noNode
		}
		if old, named := r.blocks.Get(b.Hash); named && old != id && old == parent && parent != noNode {
			return OutcomeInvalid // the block would be its own parent
		}
		ix.found = append(ix.found, id)
		parent = id
	}
	return OutcomeOK
}

// hasDuplicateHash reports whether an engine hash appears twice: by
// comparison for the usual short events, with a set for long ones, so a
// huge event costs linear time.
func hasDuplicateHash(blocks []StoredBlock) bool {
	if len(blocks) <= 32 {
		for i := range blocks {
			for j := range i {
				if blocks[i].Hash == blocks[j].Hash {
					return true
				}
			}
		}
		return false
	}
	seen := make(map[uint64]struct{}, len(blocks))
	for _, b := range blocks {
		if _, dup := seen[b.Hash]; dup {
			return true
		}
		seen[b.Hash] = struct{}{}
	}
	return false
}

// applyStored applies a stored event that checkStored accepted, using the
// nodes it found. Moving a reused engine hash off its old block can free
// nodes, so after that the remaining blocks are looked up again.
func (ix *partIndex) applyStored(r *rankState, ev *Event, st *ApplyStats) {
	parent := noNode
	if ev.HasParent {
		parent, _ = r.blocks.Get(ev.Parent)
	}
	// Growing a table rehashes it; the event's keys and engine hashes get
	// room before its first step (the rank's table is the writer's own).
	r.blocks.reserve(len(ev.Blocks))
	ix.reserveKeys(len(ev.Blocks))
	stale := false
	for i, b := range ev.Blocks {
		ix.steps.change()
		key := b.Local
		if parent != noNode {
			key = ChainHash(ix.nodes.at(parent).key, b.Local)
		}
		id := ix.found[i]
		if stale {
			id, _ = ix.byKey.Get(key)
		}
		old, named := r.blocks.Get(b.Hash)
		if named && old != id {
			// The engine reused a hash for other content: that block is
			// gone under this hash. It cannot be the parent (checked), so
			// nothing this event still needs is lost, but nodes after this
			// one may have been freed and must be looked up again.
			ix.removeHash(r, b.Hash, tierMask)
			named, stale = false, true
			id, _ = ix.byKey.Get(key)
		}
		if id == noNode {
			id = ix.newNode(key, b.Local, parent)
		}
		ix.addHash(r, b.Hash, id, ev.Tier, named)
		st.BlocksStored++
		parent = id
	}
}

// reserveKeys makes room in byKey for n more keys before they are added.
// Growing rehashes every key, tens of milliseconds at a million blocks:
// the new table is built outside any step, since a match only reads the
// old one, and swapped in by one. It ends the step under way, if any.
func (ix *partIndex) reserveKeys(n int) {
	if !ix.byKey.full(n) {
		return
	}
	ix.steps.release()
	t := ix.byKey.grown(n)
	ix.steps.change()
	ix.byKey = t
}

func (ix *partIndex) newNode(key, local uint64, parent nodeID) nodeID {
	id := ix.nodes.alloc()
	*ix.nodes.at(id) = node{key: key, local: local, parent: parent, hclass: noRun}
	ix.byKey.Put(key, id)
	ix.live++
	if parent != noNode {
		ix.nodes.at(parent).kids++
	}
	return id
}

// holdsAny reports whether slot holds the node on some tier.
func (ix *partIndex) holdsAny(n *node, slot uint32) bool {
	hi := ix.holderIdx(n, slot)
	return hi >= 0 && ix.holders(n)[hi].tiers() != 0
}

// setTiers changes the tiers of holder hi at node id and keeps every
// derived count (memberships, holes, the parent's child counts) exact. The
// holder, and then the node, are removed when nothing refers to them.
func (ix *partIndex) setTiers(r *rankState, id nodeID, hi int, tiers uint8) {
	n := ix.nodes.at(id)
	h := &ix.holders(n)[hi]
	before := h.tiers()
	if before == tiers {
		return
	}
	for t := range numTiers {
		if bit := uint8(1) << t; before&bit != tiers&bit {
			if tiers&bit != 0 {
				ix.tierBlocks[t]++
			} else {
				ix.tierBlocks[t]--
			}
		}
	}
	switch {
	case before == 0:
		ix.memberships++
	case tiers == 0:
		ix.memberships--
	}
	h.flags = h.flags&^tierMask | tiers
	if a, b := level(before), level(tiers); a != b {
		ix.levelChanged(r, id, n, hi, a, b)
	}
	ix.maybeDropHolder(id, n, hi)
}

// levelChanged updates holes and the parent's child counts after r's level
// at node id moved from a to b.
func (ix *partIndex) levelChanged(r *rankState, id nodeID, n *node, hi int, a, b int) {
	parentLevel := 0 // blocks at depth 1 have no parent to miss
	var p *node
	phi := -1
	if n.parent != noNode {
		p = ix.nodes.at(n.parent)
		phi = ix.holderIdx(p, r.slot)
		parentLevel = noLevel
		if phi >= 0 {
			parentLevel = level(ix.holders(p)[phi].tiers())
		}
	}
	kids := ix.kidCounts(id, &ix.holders(n)[hi])
	var covered int64 // children covered at level <= l
	mask := uint8(0)
	for l := range noLevel {
		covered += int64(kids[l])
		r.holes[l] += int64(b2i(b <= l && parentLevel > l) - b2i(a <= l && parentLevel > l))
		r.holes[l] += covered * int64(b2i(b > l)-b2i(a > l))
		if r.holes[l] == 0 {
			mask |= 1 << l
		}
	}
	ix.clean[r.slot] = mask
	if p == nil {
		return
	}
	if phi < 0 {
		phi = ix.addHolder(p, r.slot)
	}
	if a < noLevel {
		ix.addKid(n.parent, &ix.holders(p)[phi], a, -1)
	}
	if b < noLevel {
		ix.addKid(n.parent, &ix.holders(p)[phi], b, +1)
	}
	// The parent keeps its child n, so this never frees the parent.
	ix.maybeDropHolder(n.parent, p, phi)
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

func (ix *partIndex) kidCounts(id nodeID, h *holder) [noLevel]uint32 {
	if h.flags&kidsSpill != 0 {
		return ix.spill[spillKey{id, h.slot}]
	}
	return [noLevel]uint32{uint32(h.kid[0]), uint32(h.kid[1]), uint32(h.kid[2])}
}

func (ix *partIndex) addKid(id nodeID, h *holder, l int, delta int) {
	if h.flags&kidsSpill != 0 {
		k := spillKey{id, h.slot}
		c := ix.spill[k]
		c[l] = uint32(int64(c[l]) + int64(delta))
		ix.spill[k] = c
		return
	}
	v := int(h.kid[l]) + delta
	if v > 0xFFFF {
		c := ix.kidCounts(id, h)
		c[l] = uint32(v)
		ix.spill[spillKey{id, h.slot}] = c
		h.flags |= kidsSpill
		h.kid = [noLevel]uint16{}
		return
	}
	h.kid[l] = uint16(v)
}

func (ix *partIndex) maybeDropHolder(id nodeID, n *node, hi int) {
	h := &ix.holders(n)[hi]
	if h.tiers() != 0 {
		return
	}
	if h.flags&kidsSpill != 0 {
		k := spillKey{id, h.slot}
		if ix.spill[k] != ([noLevel]uint32{}) {
			return
		}
		delete(ix.spill, k)
	} else if h.kid != ([noLevel]uint16{}) {
		return
	}
	ix.removeHolder(n, hi)
	if n.hlen == 0 && n.kids == 0 {
		ix.freeNode(id)
	}
}

// freeNode releases id and every ancestor left with neither holder nor
// child.
func (ix *partIndex) freeNode(id nodeID) {
	for {
		n := ix.nodes.at(id)
		parent := n.parent
		ix.byKey.Delete(n.key)
		ix.nodes.release(id)
		ix.live--
		if parent == noNode {
			return
		}
		p := ix.nodes.at(parent)
		p.kids--
		if p.kids != 0 || p.hlen != 0 {
			return
		}
		id = parent
	}
}

// rankKeysSorted returns the registered ranks in (worker, rank) order.
func (ix *partIndex) rankKeysSorted() []RankKey {
	keys := make([]RankKey, 0, len(ix.byRank))
	for k := range ix.byRank {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, compareRankKeys)
	return keys
}

func compareRankKeys(a, b RankKey) int { return fsm.CompareRankKeys(a, b) }
