package indexer

import (
	"errors"
	"testing"

	"github.com/kvselect/kvselect/fsm"
)

// Test_ApplyWire drives ApplyWire with decoded batches: which rank the
// events go to, which watermark moves, and what it drops and counts.
func Test_ApplyWire(t *testing.T) {
	tok := func(first uint32, n int) []uint32 {
		out := make([]uint32, n)
		for i := range out {
			out[i] = first + uint32(i)
		}
		return out
	}
	stored16 := []any{"BlockStored", []uint64{7, 8}, nil, tok(1, 32), 16, nil, "GPU"}
	stored32 := []any{"BlockStored", []uint64{9}, nil, tok(1, 32), 32, nil, "GPU"}
	removed := []any{"BlockRemoved", []uint64{7}, "GPU"}
	tests := []struct {
		name    string
		worker  uint64 // the stream's worker; 9 is not indexed
		events  []any
		dpRank  int // -1: the batch names none
		blockBS uint32
		// what it should do
		unknown, wrong, okEvents int
		err                      error
		devicePrefix             [2]uint32 // rank 0, rank 1 on [local(7), local(8)]
		watermark                [2]bool   // rank 0, rank 1 at 5
	}{
		{name: "stored, own rank", worker: 1, events: []any{stored16}, dpRank: -1, okEvents: 1,
			devicePrefix: [2]uint32{2, 0}, watermark: [2]bool{true, false}},
		{name: "stored then removed", worker: 1, events: []any{stored16, removed}, dpRank: -1, okEvents: 2,
			watermark: [2]bool{true, false}},
		{name: "other block size dropped and counted", worker: 1, events: []any{stored32, stored16}, dpRank: -1,
			wrong: 1, okEvents: 1, devicePrefix: [2]uint32{2, 0}, watermark: [2]bool{true, false}},
		{name: "data_parallel_rank sends the events to rank 1, the watermark stays rank 0's", worker: 1,
			events: []any{stored16}, dpRank: 1, okEvents: 1, devicePrefix: [2]uint32{0, 2}, watermark: [2]bool{true, false}},
		{name: "data_parallel_rank not indexed: dropped, the watermark still moves", worker: 1,
			events: []any{stored16, removed}, dpRank: 4, unknown: 2, err: ErrUnknownRank, watermark: [2]bool{true, false}},
		{name: "worker not indexed", worker: 9, events: []any{stored16, stored32}, dpRank: -1, unknown: 2, err: ErrUnknownRank},
		{name: "empty batch moves the watermark", worker: 1, events: []any{}, dpRank: -1, watermark: [2]bool{true, false}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newCatalogHarness(t)
			h.apply(fsm.UpsertWorker{Worker: testWorker(1, "m", 16, 2)})
			batch := []any{1.0, tt.events}
			if tt.dpRank >= 0 {
				batch = append(batch, tt.dpRank)
			}
			var d WireDecoder
			b, err := d.Decode(mp(t, batch))
			if err != nil {
				t.Fatal(err)
			}
			st, err := h.x.ApplyWire(RankKey{Worker: tt.worker}, 5, b)
			if !errors.Is(err, tt.err) || (tt.err == nil && err != nil) {
				t.Fatalf("err %v, want %v", err, tt.err)
			}
			if st.UnknownRank != tt.unknown || st.WrongBlockSize != tt.wrong || st.Events[OutcomeOK] != tt.okEvents {
				t.Fatalf("stats %+v, want unknown %d wrong block size %d ok %d", st, tt.unknown, tt.wrong, tt.okEvents)
			}
			q := BlockHashes(tok(1, 32), 16, "")
			got, _, err := h.x.Match(keyM, q, nil)
			if err != nil {
				t.Fatal(err)
			}
			var prefix [2]uint32
			for _, o := range got {
				prefix[o.Rank] = o.Device
			}
			if prefix != tt.devicePrefix {
				t.Fatalf("device prefix by rank %v, want %v", prefix, tt.devicePrefix)
			}
			for r := range 2 {
				seq, ok := h.x.Watermark(RankKey{Worker: 1, Rank: uint32(r)})
				if ok != tt.watermark[r] || (ok && seq != 5) {
					t.Fatalf("rank %d watermark %d %v, want set %v", r, seq, ok, tt.watermark[r])
				}
			}
		})
	}
}

// Test_ApplyWireBlockSizeChangedAfterDecode: a partition whose block size
// changes between decoding and applying drops the batch's stored events
// as of the wrong size, under the apply mutex; nothing is applied for the
// old size.
func Test_ApplyWireBlockSizeChangedAfterDecode(t *testing.T) {
	h := newCatalogHarness(t)
	h.apply(fsm.UpsertWorker{Worker: testWorker(1, "m", 16, 1)})
	var d WireDecoder
	b, err := d.Decode(mp(t, []any{1.0, []any{[]any{"BlockStored", []uint64{7}, nil, make([]uint32, 16), 16}}}))
	if err != nil {
		t.Fatal(err)
	}
	h.apply(fsm.UpsertWorker{Worker: testWorker(1, "m", 32, 1)})
	st, err := h.x.ApplyWire(RankKey{Worker: 1}, 1, b)
	if err != nil || st.WrongBlockSize != 1 || st.BlocksStored != 0 {
		t.Fatalf("stats %+v, err %v", st, err)
	}
}
