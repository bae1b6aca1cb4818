package indexer

import (
	"math/bits"
	"math/rand/v2"
)

// keyTable is the partition's path-key → node map (byKey): open
// addressing with linear probing and backward-shift deletion (no
// tombstones), eight bytes a slot. A slot holds a node id and 32 bits of
// the key; the full key lives in the node, which a lookup that finds the
// id reads next anyway, so the table never stores it. Compared with a Go
// map (key, value, control byte and growth slack: ~25-30 bytes an entry)
// it takes 8 bytes over the load factor (at most 3/4), and a probe that
// hits costs one miss in the table plus the node the caller reads.
//
// Slots are placed by a multiplicative hash of the key xor a random seed,
// so that keys chosen to collide (path keys follow from prompts anyone
// can send) cannot be aimed at one run of slots.
type keyTable struct {
	nodes *arena
	slots []uint64 // 0: empty; else uint64(key>>32)<<32 | uint64(id)
	n     int
	shift uint // 64 - log2(len(slots))
	seed  uint64
}

const (
	keyTableMinSlots = 16
	keyMul           = 0x9E3779B97F4A7C15 // 2^64 / golden ratio
)

func newKeyTable(nodes *arena, hint int) keyTable {
	t := keyTable{nodes: nodes, seed: rand.Uint64() | 1}
	t.alloc(hint)
	return t
}

// alloc gives the table room for hint entries at most 3/4 full.
func (t *keyTable) alloc(hint int) {
	size := keyTableMinSlots
	for size*3/4 < hint {
		size *= 2
	}
	t.slots = make([]uint64, size)
	t.shift = uint(64 - bits.TrailingZeros(uint(size)))
	t.n = 0
}

func (t *keyTable) home(key uint64) uint64 { return ((key ^ t.seed) * keyMul) >> t.shift }

func slotOf(key uint64, id nodeID) uint64 { return key>>32<<32 | uint64(id) }

// Len is the number of entries.
func (t *keyTable) Len() int { return t.n }

// Get returns the node whose path key is key.
func (t *keyTable) Get(key uint64) (nodeID, bool) {
	mask := uint64(len(t.slots) - 1)
	tag := key >> 32
	for i := t.home(key); ; i = (i + 1) & mask {
		s := t.slots[i]
		if s == 0 {
			return noNode, false
		}
		if s>>32 == tag {
			if id := nodeID(s); t.nodes.at(id).key == key {
				return id, true
			}
		}
	}
}

// Put adds key → id; key must not be in the table, and node id must
// already hold key.
func (t *keyTable) Put(key uint64, id nodeID) {
	if t.full(1) {
		*t = t.grown(1)
	}
	t.place(slotOf(key, id), key)
	t.n++
}

// full reports whether n more keys would take the table past 3/4.
func (t *keyTable) full(n int) bool { return (t.n+n)*4 > len(t.slots)*3 }

func (t *keyTable) place(s, key uint64) {
	mask := uint64(len(t.slots) - 1)
	i := t.home(key)
	for t.slots[i] != 0 {
		i = (i + 1) & mask
	}
	t.slots[i] = s
}

// grown returns a copy of the table with room for n more keys. It only
// reads t, so t stays usable (by matches) until the copy replaces it.
func (t *keyTable) grown(n int) keyTable {
	g := keyTable{nodes: t.nodes, seed: t.seed}
	g.alloc(max(2*len(t.slots)*3/4, t.n+n))
	for _, s := range t.slots {
		if s != 0 {
			g.place(s, t.nodes.at(nodeID(s)).key)
			g.n++
		}
	}
	return g
}

// Delete removes key, whose node must still hold it. Later entries of its
// run move back into the gap (backward shift), so no slot is left marked
// deleted and lookups stop at the first empty slot.
func (t *keyTable) Delete(key uint64) {
	mask := uint64(len(t.slots) - 1)
	tag := key >> 32
	i := t.home(key)
	for {
		s := t.slots[i]
		if s == 0 {
			return
		}
		if s>>32 == tag && t.nodes.at(nodeID(s)).key == key {
			break
		}
		i = (i + 1) & mask
	}
	for j := (i + 1) & mask; ; j = (j + 1) & mask {
		s := t.slots[j]
		if s == 0 {
			break
		}
		// The entry at j may fill the gap at i unless its home lies
		// cyclically in (i, j].
		h := t.home(t.nodes.at(nodeID(s)).key)
		if (j-h)&mask >= (j-i)&mask {
			t.slots[i] = s
			i = j
		}
	}
	t.slots[i] = 0
	t.n--
}
