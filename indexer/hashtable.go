package indexer

import (
	"iter"
	"math/bits"
	"math/rand/v2"
)

// hashTable is a rank's engine hash → node map (rankState.blocks): open
// addressing with linear probing and backward-shift deletion, like
// keyTable, but engine hashes are not stored anywhere else, so a slot
// holds the whole hash: three 32-bit words (hash low, hash high, node id;
// id 0 marks an empty slot, since no node has id 0), 12 bytes a slot at
// most 3/4 full, against ~25-30 bytes an entry in a Go map. Engine hashes
// come from outside (any value, 0 included, or chosen to collide), so
// slots are placed by a multiplicative hash of the hash xor a per-table
// random seed. The zero value is an empty table.
type hashTable struct {
	data  []uint32
	n     int
	shift uint
	seed  uint64
}

func (t *hashTable) home(h uint64) int { return int(((h ^ t.seed) * keyMul) >> t.shift) }

func (t *hashTable) at(i int) (h uint64, id nodeID) {
	d := t.data[3*i : 3*i+3 : 3*i+3]
	return uint64(d[0]) | uint64(d[1])<<32, nodeID(d[2])
}

func (t *hashTable) set(i int, h uint64, id nodeID) {
	d := t.data[3*i : 3*i+3 : 3*i+3]
	d[0], d[1], d[2] = uint32(h), uint32(h>>32), uint32(id)
}

func (t *hashTable) slots() int { return len(t.data) / 3 }

// Len is the number of entries.
func (t *hashTable) Len() int { return t.n }

// find returns the slot holding h, or the empty slot where it would go.
func (t *hashTable) find(h uint64) (int, bool) {
	mask := t.slots() - 1
	for i := t.home(h); ; i = (i + 1) & mask {
		k, id := t.at(i)
		if id == noNode {
			return i, false
		}
		if k == h {
			return i, true
		}
	}
}

// Get returns the node named h.
func (t *hashTable) Get(h uint64) (nodeID, bool) {
	if t.n == 0 {
		return noNode, false
	}
	i, ok := t.find(h)
	if !ok {
		return noNode, false
	}
	_, id := t.at(i)
	return id, true
}

// Put names node id (not noNode) h, replacing what h named.
func (t *hashTable) Put(h uint64, id nodeID) {
	t.reserve(1)
	i, ok := t.find(h)
	if !ok {
		t.n++
	}
	t.set(i, h, id)
}

// reserve makes room for n more entries, so that Puts of them do not
// resize the table.
func (t *hashTable) reserve(n int) {
	if (t.n+n)*4 <= t.slots()*3 {
		return
	}
	slots := max(keyTableMinSlots, 2*t.slots())
	for (t.n+n)*4 > slots*3 {
		slots *= 2
	}
	t.resize(slots)
}

func (t *hashTable) resize(slots int) {
	old := *t
	t.data = make([]uint32, 3*slots)
	t.shift = uint(64 - bits.TrailingZeros(uint(slots)))
	if t.seed == 0 {
		t.seed = rand.Uint64() | 1
	}
	for i := range old.slots() {
		if h, id := old.at(i); id != noNode {
			j, _ := t.find(h)
			t.set(j, h, id)
		}
	}
}

// Delete forgets h. Later entries of its run move back into the gap.
func (t *hashTable) Delete(h uint64) {
	if t.n == 0 {
		return
	}
	i, ok := t.find(h)
	if !ok {
		return
	}
	mask := t.slots() - 1
	for j := (i + 1) & mask; ; j = (j + 1) & mask {
		k, id := t.at(j)
		if id == noNode {
			break
		}
		if (j-t.home(k))&mask >= (j-i)&mask {
			t.set(i, k, id)
			i = j
		}
	}
	t.set(i, 0, noNode)
	t.n--
}

// All yields every (hash, node) in slot order. The table must not change
// while it runs.
func (t *hashTable) All() iter.Seq2[uint64, nodeID] {
	return func(yield func(uint64, nodeID) bool) {
		for i := range t.slots() {
			if h, id := t.at(i); id != noNode && !yield(h, id) {
				return
			}
		}
	}
}
