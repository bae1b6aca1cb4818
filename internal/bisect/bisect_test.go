package bisect

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// Test_SearchFindsEveryPrefix checks, on random nested families, that the
// deepest probed depth containing each element is exactly its prefix
// length, and that probes stay far below n for few distinct prefixes.
func Test_SearchFindsEveryPrefix(t *testing.T) {
	tests := []struct {
		n, elems, maxPrefix int
	}{
		{1, 3, 1}, {2, 3, 2}, {7, 1, 7}, {512, 4, 512}, {512, 40, 30}, {513, 8, 513}, {100, 100, 100}, {64, 5, 0},
	}
	for i, tt := range tests {
		for seed := range uint64(20) {
			t.Run(fmt.Sprintf("%d/%d", i, seed), func(t *testing.T) {
				rng := rand.New(rand.NewPCG(seed, uint64(i)))
				prefix := make([]int, tt.elems) // element e is in the set at depth d iff d <= prefix[e]
				for e := range prefix {
					prefix[e] = rng.IntN(tt.maxPrefix + 1)
				}
				found := make([]int, tt.elems)
				probes := 0
				Search(tt.n, func(d int) int {
					if d < 1 || d > tt.n {
						t.Fatalf("probed depth %d outside [1, %d]", d, tt.n)
					}
					probes++
					size := 0
					for e, p := range prefix {
						if d <= p {
							size++
							found[e] = max(found[e], d)
						}
					}
					return size
				})
				for e := range prefix {
					if want := min(prefix[e], tt.n); found[e] != want {
						t.Fatalf("element %d: found prefix %d, want %d (prefixes %v)", e, found[e], want, prefix)
					}
				}
				if bound := 2 * (tt.elems + 1) * (bitsLen(tt.n) + 1); tt.n > 64 && probes > bound {
					t.Fatalf("%d probes for n=%d with %d elements, bound %d", probes, tt.n, tt.elems, bound)
				}
			})
		}
	}
}

func bitsLen(n int) int {
	b := 0
	for ; n > 0; n >>= 1 {
		b++
	}
	return b
}
