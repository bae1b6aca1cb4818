// Package testvectors gives tests their reference material, all of it in
// the repository: the KV event vectors file with real engine payloads and
// hash golden values (testdata/kv_event_vectors.json here), and the
// Mooncake trace in testdata/traces at the root. It is imported only from
// _test.go files.
package testvectors

import (
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"sync"
	"testing"
)

// Event is one expected event of a vector, with hashes as decimal strings
// of their unsigned 64-bit values.
type Event struct {
	Type        string   `json:"type"`
	BlockHashes []string `json:"block_hashes"`
	Parent      *string  `json:"parent_block_hash"`
	TokenIDs    []uint32 `json:"token_ids"`
	BlockSize   int      `json:"block_size"`
	Medium      *string  `json:"medium"`
}

// Vector is one msgpack payload (frame 3 of a KV event message) and what
// it decodes to.
type Vector struct {
	Name        string `json:"name"`
	Description string `json:"description"`
	Hex         string `json:"hex"`
	Expect      struct {
		TS     float64 `json:"ts"`
		DPRank int     `json:"data_parallel_rank"`
		Events []Event `json:"events"`
	} `json:"expect"`
}

// HashCase is a local block/sequence hash golden case.
type HashCase struct {
	Tokens         []uint32 `json:"tokens"`
	BlockSize      int      `json:"block_size"`
	LoraName       string   `json:"lora_name"`
	Seed           string   `json:"seed"`
	BlockHashes    []string `json:"block_hashes"`
	SequenceHashes []string `json:"sequence_hashes"`
}

// File is kv_event_vectors.json.
type File struct {
	Vectors     []Vector `json:"vectors"`
	LocalHashes struct {
		Cases []HashCase `json:"cases"`
	} `json:"local_hashes"`
}

// dir is this package's directory in the source tree.
func dir(tb testing.TB) string {
	tb.Helper()
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		tb.Fatal("cannot locate the testvectors package")
	}
	return filepath.Dir(file)
}

// VectorsPath returns the path of kv_event_vectors.json.
func VectorsPath(tb testing.TB) string {
	tb.Helper()
	return filepath.Join(dir(tb), "testdata", "kv_event_vectors.json")
}

// TracePath returns the path of the Mooncake synthetic trace the
// repository ships (testdata/traces; its provenance and licence are in
// testdata/traces/README.md).
func TracePath(tb testing.TB) string {
	tb.Helper()
	path := filepath.Join(dir(tb), "..", "..", "testdata", "traces", "mooncake_synthetic_trace.jsonl")
	if _, err := os.Stat(path); err != nil {
		tb.Fatalf("the shipped trace is missing: %v", err)
	}
	return path
}

var (
	once   sync.Once
	loaded File
	err    error
)

// Load reads and parses the vectors file (once per test binary).
func Load(tb testing.TB) *File {
	tb.Helper()
	once.Do(func() {
		var raw []byte
		if raw, err = os.ReadFile(VectorsPath(tb)); err == nil {
			err = json.Unmarshal(raw, &loaded)
		}
	})
	if err != nil {
		tb.Fatalf("load vectors: %v", err)
	}
	if len(loaded.Vectors) == 0 || len(loaded.LocalHashes.Cases) == 0 {
		tb.Fatal("the vectors file has no vectors or no local_hashes cases")
	}
	return &loaded
}

// ByName returns the vector with that name.
func (f *File) ByName(tb testing.TB, name string) Vector {
	tb.Helper()
	for _, v := range f.Vectors {
		if v.Name == name {
			return v
		}
	}
	tb.Fatalf("vector %s not found", name)
	return Vector{}
}

// Payload returns the vector's msgpack bytes.
func (v Vector) Payload(tb testing.TB) []byte {
	tb.Helper()
	b, err := hex.DecodeString(v.Hex)
	if err != nil {
		tb.Fatalf("vector %s: %v", v.Name, err)
	}
	return b
}

// U64 parses a decimal unsigned 64-bit value.
func U64(tb testing.TB, s string) uint64 {
	tb.Helper()
	v, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		tb.Fatalf("parse %q: %v", s, err)
	}
	return v
}

// U64s parses a list of decimal unsigned 64-bit values.
func U64s(tb testing.TB, ss []string) []uint64 {
	tb.Helper()
	out := make([]uint64, len(ss))
	for i, s := range ss {
		out[i] = U64(tb, s)
	}
	return out
}
