package indexer

import (
	"math/rand/v2"
	"slices"
	"strconv"
	"testing"

	"github.com/kvselect/kvselect/internal/testvectors"
)

func loadHashCases(t *testing.T) []testvectors.HashCase { return testvectors.Load(t).LocalHashes.Cases }

func parseU64s(t testing.TB, ss []string) []uint64 { return testvectors.U64s(t, ss) }

func Test_HashGoldenValues(t *testing.T) {
	for i, c := range loadHashCases(t) {
		t.Run(strconv.Itoa(i), func(t *testing.T) {
			if c.Seed != "" {
				if got, want := LoraSeed(c.LoraName), parseU64s(t, []string{c.Seed})[0]; got != want {
					t.Fatalf("LoraSeed(%q) = %d, want %d", c.LoraName, got, want)
				}
			}
			blocks := BlockHashes(c.Tokens, c.BlockSize, c.LoraName)
			if want := parseU64s(t, c.BlockHashes); !slices.Equal(blocks, want) {
				t.Fatalf("block hashes = %v, want %v", blocks, want)
			}
			if c.SequenceHashes != nil {
				if got, want := SequenceHashes(blocks), parseU64s(t, c.SequenceHashes); !slices.Equal(got, want) {
					t.Fatalf("sequence hashes = %v, want %v", got, want)
				}
			}
		})
	}
}

func Test_BlockHashesPartialBlock(t *testing.T) {
	tokens := make([]uint32, 40)
	if got := BlockHashes(tokens, 16, ""); len(got) != 2 {
		t.Fatalf("%d blocks from 40 tokens at block size 16, want 2", len(got))
	}
	if got := BlockHashes(tokens, 0, ""); got != nil {
		t.Fatal("block size 0 must give no blocks")
	}
}

func Test_ChainHashMatchesXXH3(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	cases := [][2]uint64{{0, 0}, {^uint64(0), ^uint64(0)}, {1, 2}, {7652252100776996844, 11299675938630946301}}
	for range 10000 {
		cases = append(cases, [2]uint64{rng.Uint64(), rng.Uint64()})
	}
	for _, c := range cases {
		if got, want := ChainHash(c[0], c[1]), chainHashGeneric(c[0], c[1]); got != want {
			t.Fatalf("ChainHash(%d, %d) = %d, XXH3 says %d", c[0], c[1], got, want)
		}
	}
}
