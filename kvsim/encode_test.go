package kvsim

import (
	"encoding/hex"
	"testing"

	"github.com/kvselect/kvselect/internal/testvectors"
)

type wireVector = testvectors.Vector

func loadWireVectors(t *testing.T) map[string]wireVector {
	out := map[string]wireVector{}
	for _, v := range testvectors.Load(t).Vectors {
		out[v.Name] = v
	}
	return out
}

func mustParseUint(t *testing.T, s string) uint64 { return testvectors.U64(t, s) }

// eventsOf rebuilds the vector's expected events as simulator events.
func eventsOf(t *testing.T, v wireVector) []event {
	t.Helper()
	var events []event
	for _, e := range v.Expect.Events {
		var ev event
		for _, h := range e.BlockHashes {
			ev.hashes = append(ev.hashes, mustParseUint(t, h))
		}
		switch e.Type {
		case "BlockStored":
			ev.kind = kindStored
			ev.tokens = e.TokenIDs
			ev.blockSize = e.BlockSize
			if e.Parent != nil {
				ev.parent, ev.hasParent = mustParseUint(t, *e.Parent), true
			}
		case "BlockRemoved":
			ev.kind = kindRemoved
		case "AllBlocksCleared":
			ev.kind = kindCleared
		default:
			t.Fatalf("vector %s: unexpected event type %q", v.Name, e.Type)
		}
		events = append(events, ev)
	}
	return events
}

// Test_EncodeMatchesVectors checks byte-identical output against the real
// engine payloads whose shape the simulator emits. A1_stored_array_7 is the
// 7-field form without lora_name; the simulator emits the 8-field form of
// A2_stored_array_8, which current vLLM sends.
func Test_EncodeMatchesVectors(t *testing.T) {
	vectors := loadWireVectors(t)
	tests := []struct {
		name     string
		encoding Encoding
	}{
		{"A2_stored_array_8", EncodingArray},
		{"A3_stored_map", EncodingMap},
		{"B1_removed_array", EncodingArray},
		{"B2_removed_map", EncodingMap},
		{"C1_cleared_array", EncodingArray},
		{"C2_cleared_map", EncodingMap},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v, ok := vectors[tt.name]
			if !ok {
				t.Fatalf("vector %s missing", tt.name)
			}
			got, err := newBatchEncoder(tt.encoding).encode(v.Expect.TS, eventsOf(t, v), v.Expect.DPRank)
			if err != nil {
				t.Fatal(err)
			}
			if want := v.Hex; hex.EncodeToString(got) != want {
				t.Fatalf("payload mismatch\n got %x\nwant %s", got, want)
			}
		})
	}
}

// Test_EncodeArray7IsPrefixOfArray8 documents how the 7-field vector
// relates to what the simulator emits: the same bytes with one field less.
func Test_EncodeArray7IsPrefixOfArray8(t *testing.T) {
	vectors := loadWireVectors(t)
	a1, a2 := vectors["A1_stored_array_7"], vectors["A2_stored_array_8"]
	got, err := newBatchEncoder(EncodingArray).encode(a2.Expect.TS, eventsOf(t, a1), 0)
	if err != nil {
		t.Fatal(err)
	}
	// A1 = fixarray(7) ... "GPU" rank; ours = fixarray(8) ... "GPU" nil rank.
	want, err := hex.DecodeString(a1.Hex)
	if err != nil {
		t.Fatal(err)
	}
	const arrayHeaderAt = 11 // 0x93, 0xcb + 8 bytes of float64, 0x91, then the event
	if got[arrayHeaderAt] != 0x98 || want[arrayHeaderAt] != 0x97 {
		t.Fatalf("event headers: got %#x, vector %#x", got[arrayHeaderAt], want[arrayHeaderAt])
	}
	if string(got[arrayHeaderAt+1:len(got)-2]) != string(want[arrayHeaderAt+1:len(want)-1]) {
		t.Fatalf("bodies differ\n got %x\nwant %x", got, want)
	}
}

func Test_EncodeNestedParent(t *testing.T) {
	events := []event{
		{kind: kindRemoved, hashes: []uint64{7}},
		{kind: kindStored, hashes: []uint64{1 << 63}, parent: 5, hasParent: true, tokens: []uint32{1, 200, 70000}, blockSize: 3},
	}
	for _, enc := range []Encoding{EncodingArray, EncodingMap} {
		t.Run(enc.String(), func(t *testing.T) {
			payload, err := newBatchEncoder(enc).encode(1.5, events, 3)
			if err != nil {
				t.Fatal(err)
			}
			b := decodeBatch(t, payload)
			if b.rank != 3 || b.ts != 1.5 || len(b.events) != 2 {
				t.Fatalf("batch = %+v", b)
			}
			rm, st := b.events[0], b.events[1]
			if rm.typ != "BlockRemoved" || len(rm.hashes) != 1 || rm.hashes[0] != 7 {
				t.Fatalf("removed = %+v", rm)
			}
			if st.typ != "BlockStored" || st.parent == nil || *st.parent != 5 || st.hashes[0] != 1<<63 ||
				len(st.tokens) != 3 || st.tokens[2] != 70000 || st.blockSize != 3 {
				t.Fatalf("stored = %+v", st)
			}
		})
	}
}
