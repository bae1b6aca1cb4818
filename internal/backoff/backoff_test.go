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

func Test_Bounds(t *testing.T) {
	tests := []struct {
		name           string
		lo, hi         time.Duration
		wantLo, wantHi time.Duration
	}{
		{"zero takes both defaults", 0, 0, DefaultMin, DefaultMax},
		{"set bounds stay", time.Millisecond, time.Second, time.Millisecond, time.Second},
		{"zero max takes the default", 10 * time.Millisecond, 0, 10 * time.Millisecond, DefaultMax},
		{"max below min takes the default", time.Second, time.Millisecond, time.Second, DefaultMax},
		{"min above the default max is the max", time.Minute, time.Second, time.Minute, time.Minute},
		{"negative min is kept for Validate", -time.Second, 0, -time.Second, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			lo, hi := Bounds(tt.lo, tt.hi)
			if lo != tt.wantLo || hi != tt.wantHi {
				t.Fatalf("Bounds(%s, %s) = %s, %s; want %s, %s", tt.lo, tt.hi, lo, hi, tt.wantLo, tt.wantHi)
			}
		})
	}
}
