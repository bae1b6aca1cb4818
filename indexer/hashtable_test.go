package indexer

import (
	"math/rand/v2"
	"testing"
)

// Test_HashTableAgreesWithMap drives the table and a Go map with the same
// random puts, overwrites and deletes over a small key space (long runs,
// frequent backward shifts; 0 and the extremes are keys too) and compares
// them after every step, All included.
func Test_HashTableAgreesWithMap(t *testing.T) {
	for _, keys := range []int{8, 50, 2000} {
		rng := rand.New(rand.NewPCG(11, uint64(keys)))
		var tab hashTable
		model := map[uint64]nodeID{}
		key := func() uint64 {
			switch k := rng.IntN(keys); k {
			case 0:
				return 0
			case 1:
				return ^uint64(0)
			default:
				return uint64(k) << 40 // equal low bits: only the seeded hash spreads them
			}
		}
		for step := range 20 * keys {
			k := key()
			switch rng.IntN(3) {
			case 0:
				tab.Delete(k)
				delete(model, k)
			default:
				id := nodeID(rng.IntN(1000) + 1)
				tab.Put(k, id)
				model[k] = id
			}
			if tab.Len() != len(model) {
				t.Fatalf("%d keys, step %d: %d entries, want %d", keys, step, tab.Len(), len(model))
			}
			if step%13 != 0 {
				continue
			}
			for k, want := range model {
				if got, ok := tab.Get(k); !ok || got != want {
					t.Fatalf("%d keys, step %d: Get(%x) = %d, %v; want %d", keys, step, k, got, ok, want)
				}
			}
			seen := 0
			for k, id := range tab.All() {
				if model[k] != id {
					t.Fatalf("All yields %x → %d; the map has %d", k, id, model[k])
				}
				seen++
			}
			if seen != len(model) {
				t.Fatalf("All yields %d entries, want %d", seen, len(model))
			}
		}
	}
	var empty hashTable
	if _, ok := empty.Get(0); ok || empty.Len() != 0 {
		t.Fatal("the zero table is not empty")
	}
	empty.Delete(5)
}
