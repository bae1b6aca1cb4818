package indexer

import (
	"testing"

	"github.com/kvselect/kvselect/fsm"
)

// allocBatches are vLLM KV event payloads in both encodings, with every
// kind of event and the strings engines send (types, media, LoRA names,
// cache spec kinds).
func allocBatches(t *testing.T) map[string][]byte {
	tok := make([]uint32, 32)
	for i := range tok {
		tok[i] = uint32(i + 1)
	}
	return map[string][]byte{
		"array": mp(t, []any{1.5, []any{
			[]any{"BlockStored", []uint64{7, 8}, 6, tok, 16, nil, "GPU", "adapter-1", nil, 0, "full_attention"},
			[]any{"BlockRemoved", []uint64{5}, "CPU_PINNED"},
			[]any{"AllBlocksCleared"},
		}, 0}),
		"map": mp(t, map[string]any{"ts": 1.5, "data_parallel_rank": 1, "events": []any{
			map[string]any{"type": "BlockStored", "block_hashes": []uint64{7, 8}, "parent_block_hash": 6,
				"token_ids": tok, "block_size": 16, "medium": "GPU", "lora_name": nil},
			map[string]any{"type": "BlockRemoved", "block_hashes": []uint64{5}, "medium": "GPU"},
		}}),
	}
}

// Test_DecodeAllocatesNothing pins WireDecoder.Decode at zero allocations
// once it has decoded a batch like the next one: its buffers are sized and
// the strings interned.
func Test_DecodeAllocatesNothing(t *testing.T) {
	for name, payload := range allocBatches(t) {
		t.Run(name, func(t *testing.T) {
			var d WireDecoder
			b, err := d.Decode(payload)
			if err != nil || len(b.Events) == 0 || b.Malformed != 0 {
				t.Fatalf("warm-up decode: %+v %v", b, err)
			}
			allocs := testing.AllocsPerRun(100, func() { b, err = d.Decode(payload) })
			if err != nil {
				t.Fatal(err)
			}
			if allocs != 0 {
				t.Fatalf("Decode: %v allocations a call", allocs)
			}
		})
	}
}

// Test_ApplyWireAllocatesNothing pins ApplyWire at zero allocations once
// the index and the batch's scratch hold what the batch needs (race
// detector or not).
func Test_ApplyWireAllocatesNothing(t *testing.T) {
	h := newCatalogHarness(t)
	h.apply(fsm.UpsertWorker{Worker: testWorker(1, "m", 16, 2)})
	tok := make([]uint32, 32)
	payload := mp(t, []any{1.5, []any{
		[]any{"BlockStored", []uint64{7, 8}, nil, tok, 16, nil, "GPU"},
		[]any{"BlockRemoved", []uint64{9}, "GPU"},
	}})
	var d WireDecoder
	b, err := d.Decode(payload)
	if err != nil {
		t.Fatal(err)
	}
	rk := RankKey{Worker: 1}
	if _, err := h.x.ApplyWire(rk, 0, b); err != nil {
		t.Fatal(err)
	}
	var st WireStats
	allocs := testing.AllocsPerRun(100, func() { st, err = h.x.ApplyWire(rk, 1, b) })
	if err != nil || st.Events[OutcomeOK] != 2 {
		t.Fatalf("ApplyWire: %+v %v", st, err)
	}
	if allocs != 0 {
		t.Fatalf("ApplyWire: %v allocations a call", allocs)
	}
}
