package indexer

import (
	"slices"
	"sync"

	"github.com/kvselect/kvselect/internal/bisect"
)

// Overlap is one rank's match against a query, in blocks. Device is the
// number of leading query blocks the rank holds contiguously on device;
// HostExt how many further blocks it holds on host (or device) after that;
// DiskExt how many further on any tier after that. So the cumulative tier
// prefixes are Device ≤ Device+HostExt ≤ Device+HostExt+DiskExt.
type Overlap struct {
	Worker  uint64
	Rank    uint32
	Device  uint32
	HostExt uint32
	DiskExt uint32
}

// Total is the rank's longest prefix on any tier.
func (o Overlap) Total() uint32 { return o.Device + o.HostExt + o.DiskExt }

type memoEntry struct {
	gen uint32
	id  nodeID
}

// matcher is the per-query scratch space, pooled to keep match allocation
// free apart from its result.
type matcher struct {
	ix     *partIndex
	q      []uint64
	keys   []uint64 // keys[d-1] is the path key at depth d, for d <= hashed
	hashed int
	// memo[d-1] is the node at depth d when its gen is the current query's;
	// stamping entries avoids clearing the memo between queries.
	memo    []memoEntry
	gen     uint32
	score   [noLevel][]uint32
	touched []uint32
	walk    []walker
}

type walker struct {
	slot  uint32
	level int
}

var matcherPool = sync.Pool{New: func() any { return new(matcher) }}

func (m *matcher) reset(ix *partIndex, q []uint64) {
	m.ix, m.q, m.hashed = ix, q, 0
	m.keys = slices.Grow(m.keys[:0], len(q))[:len(q)]
	if len(m.memo) < len(q) {
		m.memo = make([]memoEntry, len(q))
		m.gen = 0
	}
	if m.gen++; m.gen == 0 { // wrapped: stale stamps could match again
		clear(m.memo)
		m.gen = 1
	}
	for l := range m.score {
		if len(m.score[l]) < len(ix.ranks) {
			m.score[l] = make([]uint32, len(ix.ranks))
		}
	}
	m.touched = m.touched[:0]
	m.walk = m.walk[:0]
}

// probe returns the node at depth d (1-based) on the query path, or noNode.
func (m *matcher) probe(d int) nodeID {
	if e := m.memo[d-1]; e.gen == m.gen {
		return e.id
	}
	if m.hashed < d {
		m.hashKeys(d)
	}
	id, _ := m.ix.byKey.Get(m.keys[d-1])
	if id != noNode && m.ix.nodes.at(id).local != m.q[d-1] {
		id = noNode // a key collision; the block is not on this path
	}
	m.memo[d-1] = memoEntry{gen: m.gen, id: id}
	return id
}

// hashKeys extends the path keys up to depth d in one tight loop.
func (m *matcher) hashKeys(d int) {
	keys, q := m.keys[:d], m.q[:d]
	i := m.hashed
	if i == 0 {
		keys[0] = q[0]
		i = 1
	}
	for ; i < d; i++ {
		keys[i] = ChainHash(keys[i-1], q[i])
	}
	m.hashed = d
}

// signature counts, per level, the holders of the node at depth d that
// cover it at that level and have no holes there. Along the query path these
// sets only shrink, so equal signatures at two depths mean no such rank
// drops out in between.
type signature [noLevel]int32

// The same pass gives each hole-free holder the depth as a score candidate:
// a rank's score at a level is the deepest probed depth it covers there,
// because bisection probes both sides of every depth where it drops out.
func (m *matcher) signature(d int) signature {
	var s signature
	id := m.probe(d)
	if id == noNode {
		return s
	}
	for _, h := range m.ix.holders(m.ix.nodes.at(id)) {
		clean := m.ix.clean[h.slot]
		for l := level(h.tiers()); l < noLevel; l++ {
			if clean&(1<<l) != 0 {
				s[l]++
				if uint32(d) > m.score[l][h.slot] {
					m.touch(h.slot)
					m.score[l][h.slot] = uint32(d)
				}
			}
		}
	}
	return s
}

// match scores every rank against the query of local block hashes and
// appends the ranks with a non-zero overlap to out, sorted by (worker, rank).
//
// Ranks without holes at a level hold a prefix-closed set there, so along
// the query path the set of such ranks covering depth d shrinks as d grows,
// and bisect.Search finds every depth where it shrinks in O(k log n) probes
// for k distinct scores instead of visiting all n depths. Ranks with holes
// at a level are walked depth by depth, exactly like matchWalk.
func (ix *partIndex) match(q []uint64, out []Overlap) []Overlap {
	if len(q) == 0 || len(ix.byRank) == 0 {
		return out
	}
	m := matcherPool.Get().(*matcher)
	defer matcherPool.Put(m)
	m.reset(ix, q)
	defer func() { m.ix, m.q = nil, nil }()

	if m.probe(1) == noNode {
		return out
	}
	bisect.Search(len(q), m.signature)
	m.walkHoley()
	return m.results(out)
}

func (m *matcher) touch(slot uint32) {
	if m.score[0][slot] == 0 && m.score[1][slot] == 0 && m.score[2][slot] == 0 {
		m.touched = append(m.touched, slot)
	}
}

// walkHoley scores ranks that have holes at some level by walking the path
// from the first block while they still cover it.
func (m *matcher) walkHoley() {
	for _, h := range m.ix.holders(m.ix.nodes.at(m.probe(1))) {
		clean := m.ix.clean[h.slot]
		for l := level(h.tiers()); l < noLevel; l++ {
			if clean&(1<<l) == 0 {
				m.walk = append(m.walk, walker{h.slot, l})
				m.touch(h.slot)
				m.score[l][h.slot] = 1
			}
		}
	}
	for d := 2; len(m.walk) > 0 && d <= len(m.q); d++ {
		id := m.probe(d)
		if id == noNode {
			break
		}
		n := m.ix.nodes.at(id)
		alive := m.walk[:0]
		for _, w := range m.walk {
			if hi := m.ix.holderIdx(n, w.slot); hi >= 0 && level(m.ix.holders(n)[hi].tiers()) <= w.level {
				m.score[w.level][w.slot] = uint32(d)
				alive = append(alive, w)
			}
		}
		m.walk = alive
	}
}

func (m *matcher) results(out []Overlap) []Overlap {
	emit := func(slot uint32) {
		s0, s1, s2 := m.score[0][slot], m.score[1][slot], m.score[2][slot]
		m.score[0][slot], m.score[1][slot], m.score[2][slot] = 0, 0, 0
		// Coverage at a level implies coverage at every higher level, so
		// s0 <= s1 <= s2 holds; max() only guards the subtraction.
		s1, s2 = max(s1, s0), max(s2, s1, s0)
		r := m.ix.ranks[slot]
		out = append(out, Overlap{Worker: r.key.Worker, Rank: r.key.Rank, Device: s0, HostExt: s1 - s0, DiskExt: s2 - s1})
	}
	if len(m.touched) > 16 {
		// Many matches: a pass over the sorted slots beats sorting them.
		for _, slot := range m.ix.order {
			if m.score[2][slot] != 0 {
				emit(slot)
			}
		}
		for _, slot := range m.touched { // every touched slot has s2 > 0; stay safe
			m.score[0][slot], m.score[1][slot] = 0, 0
		}
		return out
	}
	slices.SortFunc(m.touched, func(a, b uint32) int { return compareRankKeys(m.ix.ranks[a].key, m.ix.ranks[b].key) })
	for _, slot := range m.touched {
		emit(slot)
	}
	return out
}

// matchWalk is the reference matcher: it walks the query path depth by
// depth and keeps, per rank and level, whether the rank still covers every
// block so far. It is the specification match must agree with, and the
// baseline its benchmark compares against.
func (ix *partIndex) matchWalk(q []uint64, out []Overlap) []Overlap {
	// score[l] of a rank is how many leading blocks it covers at level l;
	// a rank still extends its prefix at depth d only if score[l] == d-1.
	scores := map[uint32]*[noLevel]uint32{}
	var key uint64
	for d := 1; d <= len(q); d++ {
		if d == 1 {
			key = q[0]
		} else {
			key = ChainHash(key, q[d-1])
		}
		id, ok := ix.byKey.Get(key)
		if !ok || ix.nodes.at(id).local != q[d-1] {
			break
		}
		progressed := false
		for _, h := range ix.holders(ix.nodes.at(id)) {
			lv := level(h.tiers())
			sc := scores[h.slot]
			if sc == nil {
				if d > 1 || lv == noLevel {
					continue
				}
				sc = new([noLevel]uint32)
				scores[h.slot] = sc
			}
			for l := lv; l < noLevel; l++ {
				if sc[l] == uint32(d-1) {
					sc[l] = uint32(d)
					progressed = true
				}
			}
		}
		if !progressed {
			break
		}
	}
	start := len(out)
	for slot, sc := range scores {
		r := ix.ranks[slot]
		out = append(out, Overlap{Worker: r.key.Worker, Rank: r.key.Rank,
			Device: sc[0], HostExt: sc[1] - sc[0], DiskExt: sc[2] - sc[1]})
	}
	slices.SortFunc(out[start:], func(a, b Overlap) int {
		return compareRankKeys(RankKey{Worker: a.Worker, Rank: a.Rank}, RankKey{Worker: b.Worker, Rank: b.Rank})
	})
	return out
}
