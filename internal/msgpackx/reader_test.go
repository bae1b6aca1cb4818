package msgpackx

import (
	"bytes"
	"errors"
	"testing"

	"github.com/vmihailenco/msgpack/v5"
)

func mp(t *testing.T, v any) []byte {
	t.Helper()
	b, err := msgpack.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// Test_SkipMatchesLibrary checks the hand-written skip against msgpack/v5
// on assorted values: both must consume exactly the same bytes.
func Test_SkipMatchesLibrary(t *testing.T) {
	values := []any{
		nil, true, false, 0, 127, 128, -1, -33, 70000, int64(-1 << 40), uint64(1 << 63), 1.5, float32(2.5),
		"", "short", string(make([]byte, 300)), []byte{}, make([]byte, 70000),
		[]any{1, []any{2, []any{3, map[string]any{"a": []int{1, 2}}}}},
		map[string]any{"k": map[string]any{"j": nil}}, make([]int, 20), make([]int, 70000),
	}
	for i, v := range values {
		b := mp(t, v)
		var r Reader
		r.Reset(append(b, 0xc0))
		if err := r.Skip(); err != nil {
			t.Fatalf("value %d: skip: %v", i, err)
		}
		if r.Mark() != len(b) {
			t.Errorf("value %d: skip consumed %d bytes, want %d", i, r.Mark(), len(b))
		}
	}
	// Ext types, which the library writes for time.Time.
	var r Reader
	for _, b := range [][]byte{{0xd4, 1, 2}, {0xd8, 1, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}, {0xc7, 2, 5, 1, 2}} {
		r.Reset(b)
		if err := r.Skip(); err != nil || r.Mark() != len(b) {
			t.Errorf("ext % x: err %v off %d", b, err, r.Mark())
		}
	}
	// Deep nesting costs no stack.
	deep := bytes.Repeat([]byte{0x91}, 1<<20)
	r.Reset(append(deep, 0xc0))
	if err := r.Skip(); err != nil {
		t.Errorf("deep nesting: %v", err)
	}
	r.Reset(deep)
	if err := r.Skip(); err == nil {
		t.Errorf("truncated deep nesting accepted")
	}
}

// Test_Scalars reads values the library wrote with each typed reader:
// in-range values come back exactly, anything else is ErrMalformed and
// consumes nothing a retry could not rewind.
func Test_Scalars(t *testing.T) {
	type read func(r *Reader) (any, error)
	u64 := func(r *Reader) (any, error) { return r.Uint64() }
	u32 := func(r *Reader) (any, error) { return r.Uint32() }
	i64 := func(r *Reader) (any, error) { return r.Int() }
	boolean := func(r *Reader) (any, error) { return r.Bool() }
	str := func(r *Reader) (any, error) { b, err := r.Str(); return string(b), err }
	for _, tt := range []struct {
		name string
		in   any
		read read
		want any // nil: ErrMalformed
	}{
		{"uint64 max", uint64(1<<64 - 1), u64, uint64(1<<64 - 1)},
		{"uint64 small", 5, u64, uint64(5)},
		{"uint64 negative", -1, u64, nil},
		{"uint64 of a string", "x", u64, nil},
		{"uint32 max", uint32(1<<32 - 1), u32, uint32(1<<32 - 1)},
		{"uint32 too big", uint64(1 << 32), u32, nil},
		{"int min", int64(-1 << 63), i64, int64(-1 << 63)},
		{"int too big", uint64(1 << 63), i64, nil},
		{"true", true, boolean, true},
		{"false", false, boolean, false},
		{"bool of nil", nil, boolean, nil},
		{"bool of 1", 1, boolean, nil},
		{"string", "héllo", str, "héllo"},
		{"string of bin", []byte("x"), str, nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var r Reader
			r.Reset(mp(t, tt.in))
			got, err := tt.read(&r)
			if tt.want == nil {
				if !errors.Is(err, ErrMalformed) {
					t.Fatalf("got %v, %v; want ErrMalformed", got, err)
				}
				return
			}
			if err != nil || got != tt.want || r.Remaining() != 0 {
				t.Fatalf("got %v (%T), %v, %d left; want %v", got, got, err, r.Remaining(), tt.want)
			}
		})
	}
}

// Test_MarkRewind: a value read half-way can be read again from its mark.
func Test_MarkRewind(t *testing.T) {
	var r Reader
	r.Reset(mp(t, []any{uint64(7), "x"}))
	m := r.Mark()
	if n, err := r.ArrayLen(); n != 2 || err != nil {
		t.Fatalf("array: %d %v", n, err)
	}
	if _, err := r.Uint64(); err != nil {
		t.Fatal(err)
	}
	r.Rewind(m)
	if err := r.Skip(); err != nil || r.Remaining() != 0 {
		t.Fatalf("skip after rewind: %v, %d left", err, r.Remaining())
	}
	r.Rewind(r.Mark() + 1) // never forward
	if r.Remaining() != 0 {
		t.Fatal("rewind moved forward")
	}
}

// Test_ReaderAllocatesNothing pins the claim of the package doc: reading
// every kind of value (but OptStr, documented to copy) allocates nothing.
func Test_ReaderAllocatesNothing(t *testing.T) {
	doc := mp(t, []any{
		uint64(1 << 63), -5, int64(-1 << 40), 1.5, float32(2.5), true, "text", []byte{1, 2}, nil, "opt",
		map[string]any{"k": []any{1, "x", nil}}, []any{[]any{1, 2}, map[string]any{"a": 1.0}},
	})
	var r Reader
	read := func() error {
		r.Reset(doc)
		if _, err := r.ArrayLen(); err != nil {
			return err
		}
		if _, err := r.Uint64(); err != nil {
			return err
		}
		if _, err := r.Int(); err != nil {
			return err
		}
		if _, _, err := r.Integer(); err != nil {
			return err
		}
		for range 2 {
			if _, err := r.Number(); err != nil {
				return err
			}
		}
		if _, err := r.Bool(); err != nil {
			return err
		}
		if _, err := r.Str(); err != nil {
			return err
		}
		if _, err := r.StrOrBin(false); err != nil {
			return err
		}
		for range 2 {
			if _, _, err := r.OptBytes(); err != nil {
				return err
			}
		}
		if _, err := r.MapLen(); err != nil {
			return err
		}
		m := r.Mark()
		if err := r.Skip(); err != nil { // the key
			return err
		}
		r.Rewind(m)
		for range 3 {
			if err := r.Skip(); err != nil {
				return err
			}
		}
		if r.Remaining() != 0 {
			return r.Fail("trailing bytes")
		}
		return nil
	}
	var err error
	allocs := testing.AllocsPerRun(100, func() { err = read() })
	if err != nil {
		t.Fatal(err)
	}
	if allocs != 0 {
		t.Fatalf("reading: %v allocations a pass", allocs)
	}
}
