package indexer

// holderPool stores the holder lists of every node of a partition. A list
// lives in a run of 2^class holders carved from fixed-size chunks of its
// class; runs are recycled through per-class free lists. Nothing in the
// pool (or in a node) is a pointer, so the garbage collector never scans
// the index, and no holder list costs an allocation of its own.
//
// A node with n holders uses the smallest class with 2^class >= n; a list
// that shrinks to a quarter of its run moves to a smaller class, so memory
// follows the live holders.
type holderPool struct {
	classes [maxHolderClass + 1]holderClass
}

const (
	// maxHolderClass bounds a node's holders at 2^16, one per rank of a
	// partition (at most fsm.MaxRanksPerPartition).
	maxHolderClass = 16
	poolChunk      = 4096 // holders per chunk, for classes up to 12
	noRun          = 0xFF // node.hclass of a node without holders
)

type holderClass struct {
	chunks [][]holder
	next   uint32 // runs handed out so far
	free   []uint32
}

func runsPerChunk(class uint8) uint32 { return max(1, uint32(poolChunk)>>class) }

// run returns the holders of run r of the class (its full capacity).
func (p *holderPool) run(class uint8, r uint32) []holder {
	c := &p.classes[class]
	per := runsPerChunk(class)
	size := uint32(1) << class
	off := (r % per) * size
	return c.chunks[r/per][off : off+size : off+size]
}

func (p *holderPool) alloc(class uint8) uint32 {
	c := &p.classes[class]
	if n := len(c.free); n > 0 {
		r := c.free[n-1]
		c.free = c.free[:n-1]
		return r
	}
	r := c.next
	if r%runsPerChunk(class) == 0 {
		c.chunks = append(c.chunks, make([]holder, runsPerChunk(class)<<class))
	}
	c.next++
	return r
}

func (p *holderPool) release(class uint8, r uint32) {
	clear(p.run(class, r))
	p.classes[class].free = append(p.classes[class].free, r)
}

// classFor is the smallest class holding n holders.
func classFor(n int) uint8 {
	c := uint8(0)
	for 1<<c < n {
		c++
	}
	return c
}

// holders returns the node's holder list, backed by the pool. The slice is
// valid until the node's holder count changes.
func (ix *partIndex) holders(n *node) []holder {
	if n.hlen == 0 {
		return nil
	}
	return ix.pool.run(n.hclass, n.hrun)[:n.hlen]
}

// addHolder appends an empty holder for slot and returns its index. The
// node's earlier holder slices are invalid afterwards.
func (ix *partIndex) addHolder(n *node, slot uint32) int {
	switch {
	case n.hlen == 0:
		n.hclass, n.hrun = 0, ix.pool.alloc(0)
	case int(n.hlen) == 1<<n.hclass:
		class := n.hclass + 1
		r := ix.pool.alloc(class)
		copy(ix.pool.run(class, r), ix.pool.run(n.hclass, n.hrun))
		ix.pool.release(n.hclass, n.hrun)
		n.hclass, n.hrun = class, r
	}
	ix.pool.run(n.hclass, n.hrun)[n.hlen] = holder{slot: slot}
	n.hlen++
	return int(n.hlen) - 1
}

// removeHolder deletes holder i (the last one takes its place).
func (ix *partIndex) removeHolder(n *node, i int) {
	hs := ix.pool.run(n.hclass, n.hrun)
	last := int(n.hlen) - 1
	hs[i] = hs[last]
	hs[last] = holder{}
	n.hlen--
	switch {
	case n.hlen == 0:
		ix.pool.release(n.hclass, n.hrun)
		n.hclass, n.hrun = noRun, 0
	case n.hclass >= 2 && int(n.hlen) <= 1<<(n.hclass-2):
		class := classFor(int(n.hlen))
		r := ix.pool.alloc(class)
		copy(ix.pool.run(class, r), hs[:n.hlen])
		ix.pool.release(n.hclass, n.hrun)
		n.hclass, n.hrun = class, r
	}
}

func (ix *partIndex) holderIdx(n *node, slot uint32) int {
	for i, h := range ix.holders(n) {
		if h.slot == slot {
			return i
		}
	}
	return -1
}
