package indexer

import (
	"math/rand/v2"
	"testing"
)

// Test_KeyTableAgreesWithMap drives the table and a Go map with the same
// random puts and deletes and compares every key after each step. Keys
// share their high 32 bits in groups (the tag a slot keeps), so the full
// key comparison through the node is what tells them apart; the small
// key space keeps runs long and makes backward shifts common.
func Test_KeyTableAgreesWithMap(t *testing.T) {
	for _, tc := range []struct {
		name string
		keys int
		ops  int
	}{
		{"small, many deletes", 40, 4000},
		{"grows past several sizes", 3000, 20000},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(7, uint64(tc.keys)))
			var nodes arena
			tab := newKeyTable(&nodes, 0)
			model := map[uint64]nodeID{}
			key := func() uint64 { k := uint64(rng.IntN(tc.keys)); return (k%7)<<32 | k*2654435761 }
			for step := range tc.ops {
				k := key()
				if id, ok := model[k]; ok && rng.IntN(2) == 0 {
					tab.Delete(k)
					nodes.release(id)
					delete(model, k)
				} else if !ok {
					id := nodes.alloc()
					nodes.at(id).key = k
					tab.Put(k, id)
					model[k] = id
				}
				if tab.Len() != len(model) {
					t.Fatalf("step %d: %d entries, want %d", step, tab.Len(), len(model))
				}
				if step%97 == 0 || step == tc.ops-1 {
					for k2 := range uint64(tc.keys) {
						k2 = (k2%7)<<32 | k2*2654435761
						got, ok := tab.Get(k2)
						want, wok := model[k2]
						if ok != wok || got != want {
							t.Fatalf("step %d: Get(%x) = %d, %v; want %d, %v", step, k2, got, ok, want, wok)
						}
					}
				}
			}
			// Deleting a key that is not there changes nothing.
			tab.Delete(1<<63 | 12345)
			if tab.Len() != len(model) {
				t.Fatalf("deleting an absent key changed the count")
			}
		})
	}
}
