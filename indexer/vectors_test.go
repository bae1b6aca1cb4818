package indexer

import (
	"encoding/json"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
)

// sharedDir locates ../shared (beside the repository) from the package dir.
func sharedDir(t testing.TB) string {
	t.Helper()
	dir, err := filepath.Abs(filepath.Join("..", "..", "shared"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dir); err != nil {
		t.Fatalf("shared reference material not found at %s: %v", dir, err)
	}
	return dir
}

type hashCase struct {
	Tokens         []uint32 `json:"tokens"`
	BlockSize      int      `json:"block_size"`
	LoraName       string   `json:"lora_name"`
	Seed           string   `json:"seed"`
	BlockHashes    []string `json:"block_hashes"`
	SequenceHashes []string `json:"sequence_hashes"`
}

func loadHashCases(t *testing.T) []hashCase {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(sharedDir(t), "testdata", "kv_event_vectors.json"))
	if err != nil {
		t.Fatal(err)
	}
	var file struct {
		LocalHashes struct {
			Cases []hashCase `json:"cases"`
		} `json:"local_hashes"`
	}
	if err := json.Unmarshal(raw, &file); err != nil {
		t.Fatal(err)
	}
	if len(file.LocalHashes.Cases) == 0 {
		t.Fatal("no local_hashes cases in the vectors file")
	}
	return file.LocalHashes.Cases
}

func parseU64s(t *testing.T, ss []string) []uint64 {
	t.Helper()
	out := make([]uint64, len(ss))
	for i, s := range ss {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		out[i] = v
	}
	return out
}

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
