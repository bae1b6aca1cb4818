package indexer

import (
	"bytes"
	"encoding/hex"
	"errors"
	"slices"
	"testing"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/kvselect/kvselect/internal/testvectors"
)

func loadWireVectors(t testing.TB) []testvectors.Vector { return testvectors.Load(t).Vectors }

// TestWireVectors decodes every real engine payload of the vectors file
// and compares it field by field with its expected value.
func TestWireVectors(t *testing.T) {
	var d WireDecoder
	for _, v := range loadWireVectors(t) {
		t.Run(v.Name, func(t *testing.T) {
			payload, err := hex.DecodeString(v.Hex)
			if err != nil {
				t.Fatal(err)
			}
			b, err := d.Decode(payload)
			if err != nil {
				t.Fatalf("decode: %v", err)
			}
			if b.TS != v.Expect.TS {
				t.Errorf("ts = %v, want %v", b.TS, v.Expect.TS)
			}
			if !b.HasDPRank || int(b.DPRank) != v.Expect.DPRank {
				t.Errorf("dp rank = %v/%d, want %d", b.HasDPRank, b.DPRank, v.Expect.DPRank)
			}
			if b.Malformed != 0 || b.Ignored != 0 {
				t.Errorf("malformed %d ignored %d, want 0", b.Malformed, b.Ignored)
			}
			if len(b.Events) != len(v.Expect.Events) {
				t.Fatalf("%d events, want %d", len(b.Events), len(v.Expect.Events))
			}
			for i, want := range v.Expect.Events {
				got := b.Events[i]
				kinds := map[string]EventKind{"BlockStored": EventStored, "BlockRemoved": EventRemoved, "AllBlocksCleared": EventCleared}
				if got.Kind != kinds[want.Type] {
					t.Errorf("event %d kind %v, want %s", i, got.Kind, want.Type)
				}
				if wantHashes := parseU64s(t, want.BlockHashes); !slices.Equal(got.Hashes, wantHashes) && len(wantHashes)+len(got.Hashes) > 0 {
					t.Errorf("event %d hashes %v, want %v", i, got.Hashes, wantHashes)
				}
				if (want.Parent != nil) != got.HasParent {
					t.Errorf("event %d parent presence %v, want %v", i, got.HasParent, want.Parent != nil)
				}
				if !slices.Equal(got.Tokens, want.TokenIDs) && len(want.TokenIDs)+len(got.Tokens) > 0 {
					t.Errorf("event %d tokens differ", i)
				}
				if got.BlockSize != int64(want.BlockSize) {
					t.Errorf("event %d block size %d, want %d", i, got.BlockSize, want.BlockSize)
				}
				wantMedium := ""
				if want.Medium != nil {
					wantMedium = *want.Medium
				}
				if got.Medium != wantMedium || got.Tier != TierDevice {
					t.Errorf("event %d medium %q tier %v, want %q device", i, got.Medium, got.Tier, wantMedium)
				}
			}
		})
	}
}

// TestWireVectorsIndex applies the stored vectors to an index: the local
// hashes of the two blocks are the golden values of the local_hashes
// section, whatever engine hash encoding carried them.
func TestWireVectorsIndex(t *testing.T) {
	var d WireDecoder
	want := []uint64{7652252100776996844, 11299675938630946301}
	for _, v := range loadWireVectors(t) {
		payload, _ := hex.DecodeString(v.Hex)
		b, err := d.Decode(payload)
		if err != nil || len(b.Events) != 1 || b.Events[0].Kind != EventStored {
			continue
		}
		evs, invalid := b.keepBlockSize(b.toEvents(), 16)
		if invalid != 0 || len(evs) != 1 {
			t.Fatalf("%s: invalid %d events %d", v.Name, invalid, len(evs))
		}
		var locals []uint64
		for _, blk := range evs[0].Blocks {
			locals = append(locals, blk.Local)
		}
		if !slices.Equal(locals, want) {
			t.Errorf("%s: local hashes %v, want %v", v.Name, locals, want)
		}
		if _, invalid := b.keepBlockSize(b.toEvents(), 32); invalid != 1 {
			t.Errorf("%s: block size mismatch not rejected", v.Name)
		}
	}
}

// mp encodes a Go value with msgpack/v5 for hand-built test payloads.
func mp(t testing.TB, v any) []byte {
	t.Helper()
	var buf bytes.Buffer
	enc := msgpack.NewEncoder(&buf)
	enc.UseCompactInts(true)
	enc.SetSortMapKeys(true)
	if err := enc.Encode(v); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func TestWireShapes(t *testing.T) {
	tok := make([]uint32, 16)
	for i := range tok {
		tok[i] = uint32(i + 1)
	}
	stored := []any{"BlockStored", []uint64{7}, nil, tok, 16, nil, "GPU"}
	tests := []struct {
		name      string
		payload   any
		batchErr  bool
		events    []EventKind
		tiers     []Tier
		malformed int
		ignored   int
		dpRank    int // -1: absent
	}{
		{"old two-element batch", []any{1.5, []any{stored}}, false, []EventKind{EventStored}, []Tier{TierDevice}, 0, 0, -1},
		{"integer ts and extra batch fields", []any{17, []any{stored}, 3, "future"}, false, []EventKind{EventStored}, nil, 0, 0, 3},
		{"map batch", map[string]any{"events": []any{stored}, "ts": 1.0, "data_parallel_rank": 2, "extra": []int{1}}, false, []EventKind{EventStored}, nil, 0, 0, 2},
		{"map batch nil rank", map[string]any{"events": []any{}, "data_parallel_rank": nil}, false, nil, nil, 0, 0, -1},
		{"map batch without events", map[string]any{"ts": 1.0}, true, nil, nil, 0, 0, -1},
		{"one-element batch", []any{1.0}, true, nil, nil, 0, 0, -1},
		{"not a batch", "hello", true, nil, nil, 0, 0, -1},
		{"negative dp rank", []any{1.0, []any{}, -1}, true, nil, nil, 0, 0, -1},
		{"events not an array", []any{1.0, 5, 0}, true, nil, nil, 0, 0, -1},
		{"media to tiers", []any{1.0, []any{
			[]any{"BlockRemoved", []uint64{1}, "CPU_PINNED"},
			[]any{"BlockRemoved", []uint64{1}, "cpu"},
			[]any{"BlockRemoved", []uint64{1}, "NVME"},
			[]any{"BlockRemoved", []uint64{1}, "SHARED_STORAGE"},
			[]any{"BlockRemoved", []uint64{1}, nil},
			[]any{"BlockRemoved", []uint64{1}},
		}, 0}, false, []EventKind{EventRemoved, EventRemoved, EventRemoved, EventRemoved, EventRemoved, EventRemoved},
			[]Tier{TierHost, TierHost, TierDisk, TierDisk, TierDevice, TierDevice}, 0, 0, 0},
		{"malformed events skipped, batch kept", []any{1.0, []any{
			[]any{"BlockStored", []uint64{7}, nil, tok[:15], 16},  // tokens != blocks*size
			[]any{"BlockStored", []any{"x"}, nil, tok, 16},        // string hash
			[]any{"BlockStored", []uint64{7}, nil, []int{-1}, 16}, // negative token
			[]any{"BlockStored", []uint64{7}, nil, tok, 0},        // zero block size
			[]any{"BlockStored", []uint64{7}, nil, tok},           // no block size
			[]any{"Unknown", 1, 2},                                // unknown type
			[]any{},                                               // empty
			[]any{"BlockRemoved", []uint64{1}, "FLOPPY"},          // unknown medium
			map[string]any{"block_hashes": []uint64{1}},           // no type
			42, // not an event
			[]any{"AllBlocksCleared", "extra", map[string]any{"nested": []int{1}}}, // fine
		}, 0}, false, []EventKind{EventCleared}, nil, 10, 0, 0},
		{"non-main groups ignored", []any{1.0, []any{
			[]any{"BlockStored", []uint64{7}, nil, tok, 16, nil, "GPU", nil, nil, 1, "full_attention"},
			[]any{"BlockStored", []uint64{7}, nil, tok, 16, nil, "GPU", nil, nil, 0, "sliding_window"},
			map[string]any{"type": "BlockRemoved", "block_hashes": []uint64{1}, "group_idx": 2},
			[]any{"BlockRemoved", []uint64{1}, "GPU", 1},
			[]any{"BlockStored", []uint64{7}, nil, tok, 16, nil, "GPU", nil, nil, 0, "mla_attention"},
		}, 0}, false, []EventKind{EventStored}, nil, 0, 4, 0},
		{"map event keys in any order with unknown keys", []any{1.0, []any{
			map[string]any{"zzz": []any{1, []any{2}}, "token_ids": tok, "type": "BlockStored", "block_size": 16, "block_hashes": []int64{-5}, "parent_block_hash": int64(-6), "medium": "CPU"},
		}}, false, []EventKind{EventStored}, []Tier{TierHost}, 0, 0, -1},
	}
	var d WireDecoder
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, err := d.Decode(mp(t, tt.payload))
			if tt.batchErr {
				if !errors.Is(err, ErrMalformedBatch) {
					t.Fatalf("err = %v, want ErrMalformedBatch", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var kinds []EventKind
			var tiers []Tier
			for _, e := range b.Events {
				kinds, tiers = append(kinds, e.Kind), append(tiers, e.Tier)
			}
			if !slices.Equal(kinds, tt.events) {
				t.Errorf("events %v, want %v", kinds, tt.events)
			}
			if tt.tiers != nil && !slices.Equal(tiers, tt.tiers) {
				t.Errorf("tiers %v, want %v", tiers, tt.tiers)
			}
			if b.Malformed != tt.malformed || b.Ignored != tt.ignored {
				t.Errorf("malformed %d ignored %d, want %d %d", b.Malformed, b.Ignored, tt.malformed, tt.ignored)
			}
			if got := map[bool]int{true: int(b.DPRank), false: -1}[b.HasDPRank]; got != tt.dpRank {
				t.Errorf("dp rank %d, want %d", got, tt.dpRank)
			}
		})
	}
}

func TestWireSignedAndBinaryHashes(t *testing.T) {
	tok := make([]uint32, 32)
	payload := mp(t, []any{1.0, []any{
		[]any{"BlockStored", []any{int64(-1), []byte{1, 2, 3, 4, 5, 6, 7, 8, 9}, []byte{0xab}}, []byte{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x2a}, append(tok, make([]uint32, 16)...), 16},
	}})
	var d WireDecoder
	b, err := d.Decode(payload)
	if err != nil || len(b.Events) != 1 {
		t.Fatalf("decode: %v %+v", err, b)
	}
	ev := b.Events[0]
	if want := []uint64{^uint64(0), 0x0203040506070809, 0xab}; !slices.Equal(ev.Hashes, want) {
		t.Errorf("hashes %x, want %x", ev.Hashes, want)
	}
	if !ev.HasParent || ev.Parent != 0x2a {
		t.Errorf("parent %v %x, want 2a", ev.HasParent, ev.Parent)
	}
}

func TestWireTrailingBytesAndTruncation(t *testing.T) {
	good, _ := hex.DecodeString(loadWireVectors(t)[0].Hex)
	var d WireDecoder
	if _, err := d.Decode(append(slices.Clone(good), 0xc0)); !errors.Is(err, ErrMalformedBatch) {
		t.Errorf("trailing byte: err = %v", err)
	}
	for n := range len(good) {
		if _, err := d.Decode(good[:n]); !errors.Is(err, ErrMalformedBatch) {
			t.Fatalf("truncated to %d bytes: err = %v", n, err)
		}
	}
	// A header that claims 2^32-1 elements must fail without allocating them.
	if _, err := d.Decode([]byte{0x93, 0x01, 0xdd, 0xff, 0xff, 0xff, 0xff}); !errors.Is(err, ErrMalformedBatch) {
		t.Errorf("huge array header: err = %v", err)
	}
}

// FuzzDecodeWire feeds arbitrary payloads to the decoder: it must never
// panic, must reject or accept consistently, and every accepted event
// must be internally consistent and convertible.
func FuzzDecodeWire(f *testing.F) {
	for _, v := range loadWireVectors(f) {
		b, _ := hex.DecodeString(v.Hex)
		f.Add(b)
	}
	f.Add([]byte{0x92, 0xc0, 0x90})
	f.Add([]byte{0x83, 0xa2, 't', 's', 0x01, 0xa6, 'e', 'v', 'e', 'n', 't', 's', 0x90, 0xa1, 'x', 0xc0})
	var d WireDecoder
	f.Fuzz(func(t *testing.T, payload []byte) {
		b, err := d.Decode(payload)
		if err != nil {
			if !errors.Is(err, ErrMalformedBatch) {
				t.Fatalf("error %v does not wrap ErrMalformedBatch", err)
			}
			return
		}
		for _, e := range b.Events {
			if e.Kind == EventStored && int64(len(e.Tokens)) != int64(len(e.Hashes))*e.BlockSize {
				t.Fatalf("stored event with %d tokens for %d blocks of %d", len(e.Tokens), len(e.Hashes), e.BlockSize)
			}
		}
		evs, invalid := b.keepBlockSize(b.toEvents(), 16)
		if len(evs)+invalid != len(b.Events) {
			t.Fatalf("conversion lost events: %d + %d != %d", len(evs), invalid, len(b.Events))
		}
	})
}
