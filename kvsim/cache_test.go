package kvsim

import (
	"slices"
	"testing"
)

func Test_BlockCacheAdmit(t *testing.T) {
	type step struct {
		chain       []uint64
		wantHits    int
		wantStored  []uint64
		wantEvicted []uint64
		wantOrder   []uint64 // most recent first
	}
	tests := []struct {
		name     string
		capacity int
		steps    []step
	}{
		{
			name:     "cold then full hit",
			capacity: 8,
			steps: []step{
				{chain: []uint64{1, 2, 3}, wantStored: []uint64{1, 2, 3}, wantOrder: []uint64{1, 2, 3}},
				{chain: []uint64{1, 2, 3}, wantHits: 3, wantOrder: []uint64{1, 2, 3}},
			},
		},
		{
			name:     "shared prefix extends",
			capacity: 8,
			steps: []step{
				{chain: []uint64{1, 2}, wantStored: []uint64{1, 2}, wantOrder: []uint64{1, 2}},
				{chain: []uint64{1, 2, 3, 4}, wantHits: 2, wantStored: []uint64{3, 4}, wantOrder: []uint64{1, 2, 3, 4}},
			},
		},
		{
			name:     "eviction takes leaves, never a hit",
			capacity: 4,
			steps: []step{
				{chain: []uint64{1, 2, 3}, wantStored: []uint64{1, 2, 3}, wantOrder: []uint64{1, 2, 3}},
				{chain: []uint64{10}, wantStored: []uint64{10}, wantOrder: []uint64{10, 1, 2, 3}},
				// Needs two slots: 3 and 2 are the least recent leaves; 1 is a hit.
				{chain: []uint64{1, 4, 5}, wantHits: 1, wantStored: []uint64{4, 5}, wantEvicted: []uint64{3, 2}, wantOrder: []uint64{1, 4, 5, 10}},
			},
		},
		{
			name:     "branch touches parent before children",
			capacity: 5,
			steps: []step{
				{chain: []uint64{1, 2, 3}, wantStored: []uint64{1, 2, 3}, wantOrder: []uint64{1, 2, 3}},
				{chain: []uint64{1, 7}, wantHits: 1, wantStored: []uint64{7}, wantOrder: []uint64{1, 7, 2, 3}},
				{chain: []uint64{8, 9}, wantStored: []uint64{8, 9}, wantEvicted: []uint64{3}, wantOrder: []uint64{8, 9, 1, 7, 2}},
			},
		},
		{
			name:     "longer than capacity stores the first blocks",
			capacity: 3,
			steps: []step{
				{chain: []uint64{1, 2, 3, 4, 5}, wantStored: []uint64{1, 2, 3}, wantOrder: []uint64{1, 2, 3}},
				{chain: []uint64{1, 2, 3, 4, 5}, wantHits: 3, wantOrder: []uint64{1, 2, 3}},
				{chain: []uint64{6, 7, 8, 9}, wantStored: []uint64{6, 7, 8}, wantEvicted: []uint64{3, 2, 1}, wantOrder: []uint64{6, 7, 8}},
			},
		},
		{
			name:     "empty prompt",
			capacity: 2,
			steps:    []step{{chain: nil, wantOrder: []uint64{}}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newBlockCache(tt.capacity)
			for i, s := range tt.steps {
				a := c.admit(s.chain)
				if a.hits != s.wantHits || !slices.Equal(a.stored, s.wantStored) || !slices.Equal(a.evicted, s.wantEvicted) {
					t.Fatalf("step %d: admit = hits %d stored %v evicted %v, want hits %d stored %v evicted %v",
						i, a.hits, a.stored, a.evicted, s.wantHits, s.wantStored, s.wantEvicted)
				}
				if got := c.order(); !slices.Equal(got, s.wantOrder) {
					t.Fatalf("step %d: order = %v, want %v", i, got, s.wantOrder)
				}
				if c.len() > tt.capacity {
					t.Fatalf("step %d: %d blocks exceed capacity %d", i, c.len(), tt.capacity)
				}
			}
		})
	}
}

// Test_BlockCacheNeverOrphans drives a cache with random prompts built from
// a small tree of prefixes and checks after every step that each cached
// block's parent is cached and more recently used.
func Test_BlockCacheNeverOrphans(t *testing.T) {
	const capacity = 16
	c := newBlockCache(capacity)
	parent := map[uint64]uint64{} // engine hash -> parent hash (0 = root)
	x := uint64(1)
	for step := range 2000 {
		// A prompt: a random branch of a 4-ary tree of depth up to 8.
		x = splitmix64(x)
		depth := 1 + int(x%8)
		tokens := make([]uint32, depth*2)
		for i := range tokens {
			x = splitmix64(x)
			tokens[i] = uint32(x % 4)
		}
		chain := engineHashes(tokens, 2)
		for i, h := range chain {
			if i > 0 {
				parent[h] = chain[i-1]
			}
		}
		c.admit(chain)
		pos := map[uint64]int{}
		for i, h := range c.order() {
			pos[h] = i
		}
		for h, i := range pos {
			p, ok := parent[h]
			if !ok {
				continue
			}
			j, cached := pos[p]
			if !cached || j >= i {
				t.Fatalf("step %d: block %x at %d has parent %x cached=%v at %d", step, h, i, p, cached, j)
			}
		}
	}
}

func Test_EngineHashes(t *testing.T) {
	tokens := []uint32{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17}
	got := engineHashes(tokens, 8)
	if len(got) != 2 {
		t.Fatalf("got %d hashes for two full blocks", len(got))
	}
	if again := engineHashes(tokens, 8); !slices.Equal(got, again) {
		t.Fatal("engine hashes are not deterministic")
	}
	// The same block after a different prefix hashes differently.
	other := append([]uint32{99, 2, 3, 4, 5, 6, 7, 8}, tokens[8:16]...)
	if engineHashes(other, 8)[1] == got[1] {
		t.Fatal("second block hash ignores its parent")
	}
	// kvselect's local hash of [1..16] (XXH3 seed 1337, vectors file) must
	// not be what the engine publishes.
	const localHash = 16863443419780771464
	if engineHashes(tokens[:16], 16)[0] == localHash {
		t.Fatal("engine hash equals kvselect's local hash")
	}
	if engineHashes(tokens[:7], 8) != nil {
		t.Fatal("a partial block must not be hashed")
	}
}

func Test_ReplayRing(t *testing.T) {
	tests := []struct {
		name     string
		capacity int
		added    int // seqs 0..added-1
		start    uint64
		want     []uint64
	}{
		{"empty", 4, 0, 0, nil},
		{"all", 4, 3, 0, []uint64{0, 1, 2}},
		{"from middle", 4, 3, 1, []uint64{1, 2}},
		{"past the end", 4, 3, 3, nil},
		{"wrapped, from before oldest", 4, 10, 0, []uint64{6, 7, 8, 9}},
		{"wrapped, from inside", 4, 10, 8, []uint64{8, 9}},
		{"far future", 4, 10, 1 << 63, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newReplayRing(tt.capacity)
			for seq := range uint64(tt.added) {
				r.add(replayEntry{seq: seq, payload: []byte{byte(seq)}})
			}
			var got []uint64
			for _, e := range r.since(tt.start) {
				if e.payload[0] != byte(e.seq) {
					t.Fatalf("entry %d has payload %v", e.seq, e.payload)
				}
				got = append(got, e.seq)
			}
			if !slices.Equal(got, tt.want) {
				t.Fatalf("since(%d) = %v, want %v", tt.start, got, tt.want)
			}
			if r.len() > tt.capacity {
				t.Fatalf("ring holds %d > %d", r.len(), tt.capacity)
			}
		})
	}
}
