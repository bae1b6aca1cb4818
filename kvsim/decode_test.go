package kvsim

import (
	"bytes"
	"testing"

	"github.com/vmihailenco/msgpack/v5"
)

// decodedBatch is a payload read back by the tests, independently of the
// encoder (generic msgpack decoding, either event encoding).
type decodedBatch struct {
	ts     float64
	events []decodedEvent
	rank   int
}

type decodedEvent struct {
	typ       string
	hashes    []uint64
	parent    *uint64
	tokens    []uint32
	blockSize int
	medium    string
}

func decodeBatch(t testing.TB, payload []byte) decodedBatch {
	t.Helper()
	dec := msgpack.NewDecoder(bytes.NewReader(payload))
	dec.UseLooseInterfaceDecoding(true)
	v, err := dec.DecodeInterface()
	if err != nil {
		t.Fatalf("decode payload: %v", err)
	}
	arr, ok := v.([]any)
	if !ok || len(arr) != 3 {
		t.Fatalf("batch is %T %v, want a 3-element array", v, v)
	}
	ts, ok := arr[0].(float64)
	if !ok {
		t.Fatalf("ts is %T", arr[0])
	}
	raw, ok := arr[1].([]any)
	if !ok {
		t.Fatalf("events is %T", arr[1])
	}
	b := decodedBatch{ts: ts, rank: int(asUint(t, arr[2]))}
	for _, e := range raw {
		b.events = append(b.events, decodeEvent(t, e))
	}
	return b
}

// decodeEvent normalises an array or map event.
func decodeEvent(t testing.TB, v any) decodedEvent {
	t.Helper()
	fields := map[string]any{}
	switch e := v.(type) {
	case map[string]any:
		fields = e
	case []any:
		names := map[string][]string{
			"BlockStored":      {"type", "block_hashes", "parent_block_hash", "token_ids", "block_size", "lora_id", "medium", "lora_name"},
			"BlockRemoved":     {"type", "block_hashes", "medium"},
			"AllBlocksCleared": {"type"},
		}
		if len(e) == 0 {
			t.Fatal("empty event array")
		}
		tag, _ := e[0].(string)
		want := names[tag]
		if len(e) != len(want) {
			t.Fatalf("%s has %d fields, want %d", tag, len(e), len(want))
		}
		for i, name := range want {
			fields[name] = e[i]
		}
	default:
		t.Fatalf("event is %T", v)
	}
	ev := decodedEvent{}
	ev.typ, _ = fields["type"].(string)
	ev.medium, _ = fields["medium"].(string)
	if hs, ok := fields["block_hashes"].([]any); ok {
		for _, h := range hs {
			ev.hashes = append(ev.hashes, asUint(t, h))
		}
	}
	if p := fields["parent_block_hash"]; p != nil {
		u := asUint(t, p)
		ev.parent = &u
	}
	if ts, ok := fields["token_ids"].([]any); ok {
		for _, tok := range ts {
			ev.tokens = append(ev.tokens, uint32(asUint(t, tok)))
		}
	}
	if bs, ok := fields["block_size"]; ok {
		ev.blockSize = int(asUint(t, bs))
	}
	return ev
}

func asUint(t testing.TB, v any) uint64 {
	t.Helper()
	switch n := v.(type) {
	case uint64:
		return n
	case int64:
		if n < 0 {
			t.Fatalf("negative integer %d", n)
		}
		return uint64(n)
	default:
		t.Fatalf("not an integer: %T %v", v, v)
		return 0
	}
}
