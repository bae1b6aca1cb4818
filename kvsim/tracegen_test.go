package kvsim

import (
	"bytes"
	"reflect"
	"testing"
)

// Every pattern gives a well-formed trace that reads back as written, the
// same for the same seed and another for another seed, with the sharing
// its name promises.
func Test_GenerateTrace(t *testing.T) {
	tests := []struct {
		pattern            string
		minBound, maxBound float64 // its infinite-cache hit rate
	}{
		{PatternTenants, 0.6, 1},
		{PatternSessions, 0.5, 1},
		{PatternRandom, 0, 0.1},
	}
	for _, tt := range tests {
		t.Run(tt.pattern, func(t *testing.T) {
			cfg := TraceGenConfig{Pattern: tt.pattern, Requests: 400, Seed: 3, TraceBlockTokens: 16}
			reqs, err := GenerateTrace(cfg)
			if err != nil {
				t.Fatal(err)
			}
			if len(reqs) != 400 || reqs[0].Timestamp != 0 {
				t.Fatalf("%d requests, the first at %v; want 400 from 0", len(reqs), reqs[0].Timestamp)
			}
			for i, q := range reqs {
				if i > 0 && q.Timestamp < reqs[i-1].Timestamp {
					t.Fatalf("request %d at %v, before request %d at %v", i, q.Timestamp, i-1, reqs[i-1].Timestamp)
				}
				if blocks := (q.InputLength + 15) / 16; q.InputLength < 1 || blocks != len(q.HashIDs) || q.OutputLength < 1 {
					t.Fatalf("request %d: %d input tokens over %d ids of 16, %d output", i, q.InputLength, len(q.HashIDs), q.OutputLength)
				}
			}
			var buf bytes.Buffer
			if err := WriteTrace(&buf, reqs); err != nil {
				t.Fatal(err)
			}
			back, err := ReadTrace(bytes.NewReader(buf.Bytes()))
			if err != nil || !reflect.DeepEqual(back, reqs) {
				t.Fatalf("read back: %v, equal %v", err, reflect.DeepEqual(back, reqs))
			}
			again, _ := GenerateTrace(cfg)
			if !reflect.DeepEqual(again, reqs) {
				t.Fatal("the same seed gave another trace")
			}
			cfg.Seed = 4
			if other, _ := GenerateTrace(cfg); reflect.DeepEqual(other, reqs) {
				t.Fatal("seeds 3 and 4 gave the same trace")
			}
			if b := InfiniteCacheHitRate(reqs, 16, 16); b < tt.minBound || b > tt.maxBound {
				t.Fatalf("infinite-cache hit rate %.3f, want in [%v, %v]", b, tt.minBound, tt.maxBound)
			}
		})
	}
}

// Each turn of a session extends an earlier prompt: in the sessions
// pattern every prompt but a session's first is an earlier one plus more.
func Test_GenerateTraceSessionsGrow(t *testing.T) {
	reqs, err := GenerateTrace(TraceGenConfig{Pattern: PatternSessions, Requests: 300, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	extends := 0
	for i, q := range reqs {
		for _, p := range reqs[:i] {
			if len(p.HashIDs) < len(q.HashIDs) && reflect.DeepEqual(p.HashIDs, q.HashIDs[:len(p.HashIDs)]) {
				extends++
				break
			}
		}
	}
	if extends < len(reqs)/2 {
		t.Fatalf("%d of %d prompts extend an earlier one, want most", extends, len(reqs))
	}
}

func Test_GenerateTraceConfig(t *testing.T) {
	for _, bad := range []TraceGenConfig{
		{Pattern: "zigzag"},
		{Pattern: PatternTenants, Requests: -1},
		{Pattern: PatternTenants, Rate: -2},
		{Pattern: PatternTenants, TenantSkew: 0.5},
		{Pattern: PatternSessions, FirstBlocks: 200, MaxBlocks: 100},
		{Pattern: PatternRandom, PromptBlocks: MaxTraceInputLength},
	} {
		if _, err := GenerateTrace(bad); err == nil {
			t.Errorf("GenerateTrace(%+v) accepted", bad)
		}
	}
	if reqs, err := GenerateTrace(TraceGenConfig{Pattern: PatternTenants, Tenants: 1, Requests: 5}); err != nil || len(reqs) != 5 {
		t.Fatalf("one tenant: %d requests, %v", len(reqs), err)
	}
}
