package api

import (
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// fastCases are bodies for the differential test and the fuzz seed:
// fast says whether decodeFast must decide the body alone.
var fastCases = []struct {
	body string
	fast bool
}{
	{`{}`, true},
	{` {"model_name":"m","token_ids":[1,2,3]} `, true},
	{`{"model_name":"m","tenant_id":"t","token_ids":[0, 4294967295],"lora_name":"l","min_catalog_index":7}`, true},
	{`{"routing_group":"g","block_hashes":[1,-2],"sequence_hashes":[3,4],"isl_tokens":32}`, true},
	{`{"token_ids":[],"selection_id":"s-1","reservation_id":"r_2"}`, true},
	{"{\n\t\"model_name\" : \"llama3:8b\" ,\r\n \"token_ids\" : [ 1 , 2 ]\n}", true},
	{`{"model_name":"ünïcode"}`, true},
	{`{"isl_tokens":-0}`, true},
	// Left to Decode: it decides, and the result must be the same.
	{`{"model_name":"a\"b"}`, false},
	{`{"model_name":null}`, false},
	{`{"token_ids":null}`, false},
	{`{"model_name":"m","model_name":"n"}`, false},
	{`{"Model_Name":"m"}`, false},
	{`{"nope":1}`, false},
	{`{"router_config_override":{"router_temperature":0.5}}`, false},
	{`{"token_ids":[1.5]}`, false},
	{`{"token_ids":[1e3]}`, false},
	{`{"token_ids":[01]}`, false},
	{`{"token_ids":[-1]}`, false},
	{`{"token_ids":[4294967296]}`, false},
	{`{"token_ids":[1,]}`, false},
	{`{"token_ids":[1 2]}`, false},
	{`{"token_ids":[`, false},
	{`{"token_ids":[1,2}`, false},
	{`{"token_ids":["1"]}`, false},
	{`{"isl_tokens":1.0}`, false},
	{`{"isl_tokens":99999999999999999999}`, false},
	{`{"min_catalog_index":-1}`, false},
	{`{"selection_id":"bad id"}`, false},
	{`{"selection_id":""}`, false},
	{`{"model_name":"m"} x`, false},
	{`{"model_name":"m"`, false},
	{`{"model_name":"\xff"}`, false},
	{"{\"model_name\":\"a\x01\"}", false},
	{`[]`, false},
	{`null`, false},
	{``, false},
}

// Test_DecodeSelectFastAgrees: whatever decodeFast decides alone, Decode
// decides the same way; and the common shapes do take the fast path.
func Test_DecodeSelectFastAgrees(t *testing.T) {
	for _, tc := range fastCases {
		t.Run(tc.body, func(t *testing.T) {
			checkFastAgrees(t, []byte(tc.body))
			var v SelectRequest
			if got := decodeFast([]byte(tc.body), &v.Prompt, &v, nil); got != tc.fast {
				t.Fatalf("decodeFast decided alone = %v, want %v", got, tc.fast)
			}
		})
	}
	// A 2048-token prompt, the benchmark's shape.
	var b strings.Builder
	b.WriteString(`{"model_name":"bench","token_ids":[`)
	for i := range 2048 {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprint(&b, 100000+i)
	}
	b.WriteString(`]}`)
	checkFastAgrees(t, []byte(b.String()))
}

func checkFastAgrees(t *testing.T, body []byte) {
	t.Helper()
	var fast, slow SelectRequest
	fastErr := DecodeSelect(body, &fast)
	slowErr := Decode(body, &slow)
	if (fastErr == nil) != (slowErr == nil) || (fastErr != nil && fastErr.Error() != slowErr.Error()) {
		t.Fatalf("DecodeSelect: %v; Decode: %v", fastErr, slowErr)
	}
	if !reflect.DeepEqual(fast, slow) {
		t.Fatalf("DecodeSelect gave %+v, Decode %+v", fast, slow)
	}
	// Into a reused buffer, as the server decodes: the same contents.
	reused := SelectRequest{Prompt: Prompt{TokenIDs: make(TokenIDs, 3, 4096)}}
	if err := DecodeSelect(body, &reused); (err == nil) != (fastErr == nil) {
		t.Fatalf("DecodeSelect into a reused buffer: %v; fresh: %v", err, fastErr)
	}
	if fastErr == nil && ((reused.TokenIDs == nil) != (fast.TokenIDs == nil) || !slices.Equal(reused.TokenIDs, fast.TokenIDs)) {
		t.Fatalf("DecodeSelect into a reused buffer gave tokens %v, fresh %v", reused.TokenIDs, fast.TokenIDs)
	}
	var fp, sp Prompt
	fastErr, slowErr = DecodePrompt(body, &fp), Decode(body, &sp)
	if (fastErr == nil) != (slowErr == nil) || (fastErr != nil && fastErr.Error() != slowErr.Error()) {
		t.Fatalf("DecodePrompt: %v; Decode: %v", fastErr, slowErr)
	}
	if !reflect.DeepEqual(fp, sp) {
		t.Fatalf("DecodePrompt gave %+v, Decode %+v", fp, sp)
	}
}

// FuzzDecodeSelectFast holds the fast path to Decode's answer on any
// input.
func FuzzDecodeSelectFast(f *testing.F) {
	for _, tc := range fastCases {
		f.Add([]byte(tc.body))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		checkFastAgrees(t, body)
	})
}

// Test_Uint32At checks the eight-byte digit path against strconv on every
// length and position, with the bytes around the number varied.
func Test_Uint32At(t *testing.T) {
	for _, num := range []string{"0", "7", "42", "123", "9999", "10000", "123456", "1234567", "12345678",
		"123456789", "4294967295", "4294967296", "12345678901", "00", "01", "0123456789"} {
		for _, tail := range []string{"", ",", "]", " ,1,2,3,4,5,6,7", ".5,1,2,3,4", "e3,11111111", "a", "99999999"[:0]} {
			b := []byte("[" + num + tail)
			v, next, ok := uint32At(b, 1)
			want, err := strconv.ParseUint(num, 10, 32)
			wantOK := err == nil && (len(num) == 1 || num[0] != '0')
			if ok != wantOK || (ok && (uint64(v) != want || next != 1+len(num))) {
				t.Errorf("uint32At(%q) = %d, %d, %v; want %d, %d, %v", b, v, next, ok, want, 1+len(num), wantOK)
			}
		}
	}
}

// BenchmarkDecodeSelect decodes the HTTP benchmark's request shape, a
// 2048-token prompt of a ~152 k-token vocabulary (Qwen2's), with the one-pass decoder and with api.Decode (the
// encoding/json baseline).
func BenchmarkDecodeSelect(b *testing.B) {
	var sb strings.Builder
	sb.WriteString(`{"model_name":"bench","token_ids":[`)
	for i := range 2048 {
		if i > 0 {
			sb.WriteByte(',')
		}
		fmt.Fprint(&sb, (i*7919+13)%151_936) // token ids of a ~152 k vocabulary
	}
	sb.WriteString(`]}`)
	body := []byte(sb.String())
	for _, impl := range []struct {
		name string
		fn   func([]byte, *SelectRequest) error
	}{
		{"one-pass", DecodeSelect},
		{"encoding-json-baseline", func(b []byte, v *SelectRequest) error { return Decode(b, v) }},
	} {
		b.Run(impl.name, func(b *testing.B) {
			b.SetBytes(int64(len(body)))
			for range b.N {
				var v SelectRequest
				if err := impl.fn(body, &v); err != nil || len(v.TokenIDs) != 2048 {
					b.Fatal(err)
				}
			}
		})
	}
}

// Test_TokenArrayAllocation: a body that never closes its array must not
// cost an allocation sized for MaxHashes (4 MiB) before failing.
func Test_TokenArrayAllocation(t *testing.T) {
	body := []byte(`{"token_ids":[1,2}`)
	allocs := testing.AllocsPerRun(20, func() {
		var v SelectRequest
		p := fastParser{b: body[13:]}
		if _, ok := p.tokenArray(); ok {
			t.Fatal("an unclosed array decoded")
		}
		_ = v
	})
	if allocs != 0 {
		t.Fatalf("%v allocations failing on an unclosed array", allocs)
	}
}
