package backoff

import (
	"testing"
	"time"
)

func Test_Next(t *testing.T) {
	b := New(100*time.Millisecond, 500*time.Millisecond)
	for i, want := range []struct {
		base time.Duration
		warn bool
	}{
		{100 * time.Millisecond, true}, {200 * time.Millisecond, false}, {400 * time.Millisecond, false},
		{500 * time.Millisecond, false}, {500 * time.Millisecond, false}, {500 * time.Millisecond, false},
		{500 * time.Millisecond, false}, {500 * time.Millisecond, false}, {500 * time.Millisecond, false},
		{500 * time.Millisecond, false}, {500 * time.Millisecond, true},
	} {
		wait, n, warn := b.Next()
		if n != i+1 || warn != want.warn || wait < want.base || wait > want.base+want.base/5 {
			t.Fatalf("failure %d: wait %v (base %v), count %d, warn %v", i+1, wait, want.base, n, warn)
		}
	}
	b.Reset()
	if wait, n, warn := b.Next(); n != 1 || !warn || wait > 120*time.Millisecond {
		t.Fatalf("after Reset: %v %d %v", wait, n, warn)
	}
	if b := New(0, 0); b.min != time.Millisecond || b.max != time.Millisecond {
		t.Fatalf("degenerate bounds: %+v", b)
	}
}
