package kvsim

// blockCache is one rank's KV block cache: a set of engine hashes with
// least-recently-used eviction.
//
// Invariant: a block's parent is always more recently used than the block.
// Every prompt touches its chain from the last block to the first, so the
// first block ends up most recent; hence the least recently used block is
// always a leaf and eviction never leaves a block whose parent is gone
// (which a router would reject as "parent not found" on a later store).
//
// Not safe for concurrent use; the owning rank's mutex guards it.
type blockCache struct {
	capacity int
	nodes    map[uint64]*cacheNode
	// root is the sentinel of a circular list: root.next is the most
	// recently used block, root.prev the least.
	root cacheNode
}

type cacheNode struct {
	hash       uint64
	prev, next *cacheNode
}

func newBlockCache(capacity int) *blockCache {
	c := &blockCache{capacity: capacity}
	c.clear()
	return c
}

// admission is what serving one prompt did to the cache.
type admission struct {
	hits    int      // leading blocks already cached
	stored  []uint64 // blocks newly cached, in prompt order, after the hits
	evicted []uint64 // blocks evicted to make room, least recent first
}

// admit serves a prompt given as its chain of engine hashes. Only the first
// capacity blocks of a longer chain are cached. The hits are touched first
// so that eviction cannot take them: they are the stored blocks' ancestors.
func (c *blockCache) admit(chain []uint64) admission {
	if len(chain) > c.capacity {
		chain = chain[:c.capacity]
	}
	var a admission
	for a.hits < len(chain) && c.nodes[chain[a.hits]] != nil {
		a.hits++
	}
	for i := a.hits - 1; i >= 0; i-- {
		c.moveToFront(c.nodes[chain[i]])
	}
	if len(chain) == a.hits {
		return a
	}
	a.stored = chain[a.hits:]
	// len(c.nodes) - hits blocks lie behind the hits, and
	// len(c.nodes) + len(stored) - capacity <= len(c.nodes) - hits because
	// len(chain) <= capacity, so eviction stops before reaching a hit.
	for excess := len(c.nodes) + len(a.stored) - c.capacity; excess > 0; excess-- {
		a.evicted = append(a.evicted, c.evictOldest())
	}
	for i := len(chain) - 1; i >= 0; i-- {
		c.touchOrInsert(chain[i])
	}
	return a
}

// prefix returns how many leading blocks of chain are cached, without
// changing the recency order (an observer's look, as the greedy-prefix router's).
func (c *blockCache) prefix(chain []uint64) int {
	n := 0
	for n < len(chain) && c.nodes[chain[n]] != nil {
		n++
	}
	return n
}

// touchPrefix returns how many leading blocks of chain are cached and marks
// them used (last block first, so that parents stay more recent than their
// children), as an engine does when it schedules a prompt that reuses them.
func (c *blockCache) touchPrefix(chain []uint64) int {
	n := c.prefix(chain)
	for i := n - 1; i >= 0; i-- {
		c.moveToFront(c.nodes[chain[i]])
	}
	return n
}

// len returns the number of cached blocks.
func (c *blockCache) len() int { return len(c.nodes) }

// clear drops every block.
func (c *blockCache) clear() {
	c.nodes = make(map[uint64]*cacheNode)
	c.root.next = &c.root
	c.root.prev = &c.root
}

func (c *blockCache) touchOrInsert(h uint64) {
	if n := c.nodes[h]; n != nil {
		c.moveToFront(n)
		return
	}
	n := &cacheNode{hash: h}
	c.nodes[h] = n
	c.linkFront(n)
}

func (c *blockCache) evictOldest() uint64 {
	n := c.root.prev
	c.unlink(n)
	delete(c.nodes, n.hash)
	return n.hash
}

func (c *blockCache) moveToFront(n *cacheNode) {
	c.unlink(n)
	c.linkFront(n)
}

func (c *blockCache) linkFront(n *cacheNode) {
	n.prev = &c.root
	n.next = c.root.next
	c.root.next.prev = n
	c.root.next = n
}

func (c *blockCache) unlink(n *cacheNode) {
	n.prev.next = n.next
	n.next.prev = n.prev
	n.prev, n.next = nil, nil
}

// order returns the cached hashes from most to least recently used (tests).
func (c *blockCache) order() []uint64 {
	out := make([]uint64, 0, len(c.nodes))
	for n := c.root.next; n != &c.root; n = n.next {
		out = append(out, n.hash)
	}
	return out
}
