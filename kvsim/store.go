package kvsim

// blockStore is where a timed engine keeps one rank's KV blocks: a plain
// LRU cache for a pure simulation (memStore), or a simulated worker rank
// that publishes every change as KV events (rankState).
type blockStore interface {
	// prefix counts the leading cached blocks of chain without touching
	// them (an observer's look).
	prefix(chain []uint64) int
	// reuse counts the leading cached blocks of chain and marks them
	// used, as an engine does when it schedules a prompt on them.
	reuse(chain []uint64) int
	// store caches the prompt's blocks, evicting the least recently used
	// ones, as Worker.Serve does; tokens hold at least len(chain) blocks.
	store(tokens []uint32, chain []uint64) (ServeResult, error)
	// len is the number of cached blocks.
	len() int
}

// memStore is a block cache that publishes nothing: the engines of the
// strategies that kvselect does not route see their caches directly.
type memStore struct{ cache *blockCache }

func newMemStore(capacity int) *memStore { return &memStore{cache: newBlockCache(capacity)} }

func (m *memStore) prefix(chain []uint64) int { return m.cache.prefix(chain) }
func (m *memStore) reuse(chain []uint64) int  { return m.cache.touchPrefix(chain) }
func (m *memStore) len() int                  { return m.cache.len() }

func (m *memStore) store(_ []uint32, chain []uint64) (ServeResult, error) {
	a := m.cache.admit(chain)
	return ServeResult{Blocks: len(chain), CachedBlocks: a.hits, StoredBlocks: len(a.stored), EvictedBlocks: len(a.evicted)}, nil
}

// A rank of a running Sim is a blockStore whose stores are published.
func (r *rankState) prefix(chain []uint64) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.cache.prefix(chain)
}

func (r *rankState) reuse(chain []uint64) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.cache.touchPrefix(chain)
}

func (r *rankState) store(tokens []uint32, chain []uint64) (ServeResult, error) {
	return r.serve(tokens, chain)
}

func (r *rankState) len() int { return r.cachedBlocks() }
