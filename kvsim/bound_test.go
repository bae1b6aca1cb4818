package kvsim

import (
	"math"
	"slices"
	"testing"
)

// The bound on a trace worked out by hand, in blocks of 4 and of 8 tokens
// (one trace id is 4 tokens).
func Test_InfiniteCacheHitRate(t *testing.T) {
	reqs := []TraceRequest{
		traceReq(0, 12, 1, 1, 2, 3),
		traceReq(1, 12, 1, 1, 2, 9),
		traceReq(2, 14, 1, 1, 2, 3, 4), // 3 full blocks of 4, 2 tokens over
		traceReq(3, 16, 1, 1, 2, 3, 4),
		traceReq(4, 4, 1, 7),
		traceReq(5, 16, 1, 1, 2, 3, 4),
	}
	const prompt = 12 + 12 + 14 + 16 + 4 + 16
	tests := []struct {
		blockSize int
		hit       int
		why       string
	}{
		// 0; [1 2] of the first; [1 2 3] of the first (the fourth id's
		// block is partial); [1 2 3] (the third stored no 4th block); 0;
		// all 16 (the fourth stored [1 2 3 4]).
		{4, 0 + 8 + 12 + 12 + 0 + 16, "blocks of 4"},
		// 1 block [1 2]; [1 2]; [1 2]; [1 2] of [1 2][3 4]; none (4
		// tokens, no full block); both blocks.
		{8, 0 + 8 + 8 + 8 + 0 + 16, "blocks of 8"},
	}
	for _, tt := range tests {
		got := InfiniteCacheHitRate(reqs, 4, tt.blockSize)
		if want := float64(tt.hit) / prompt; math.Abs(got-want) > 1e-12 {
			t.Errorf("%s: %v, want %d/%d = %v", tt.why, got, tt.hit, prompt, want)
		}
	}
	// The order does not matter (prefix blocks chain): reversed, the same.
	rev := slices.Clone(reqs)
	slices.Reverse(rev)
	if a, b := InfiniteCacheHitRate(reqs, 4, 4), InfiniteCacheHitRate(rev, 4, 4); a != b {
		t.Errorf("reversed trace: %v, want %v", b, a)
	}
	if got := InfiniteCacheHitRate(nil, 4, 4); got != 0 {
		t.Errorf("empty trace: %v", got)
	}
}
