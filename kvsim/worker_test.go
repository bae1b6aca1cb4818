package kvsim

import (
	"errors"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// mustStart starts a Sim on loopback and closes it when the test ends.
func mustStart(t *testing.T, cfg Config) *Sim {
	t.Helper()
	s, err := Start(cfg)
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return s
}

// seqTokens returns n tokens first, first+1, ...
func seqTokens(first, n int) []uint32 {
	out := make([]uint32, n)
	for i := range out {
		out[i] = uint32(first + i)
	}
	return out
}

// buffered decodes every message buffered for replay on a rank.
func buffered(t *testing.T, w *Worker, rank int) []decodedBatch {
	t.Helper()
	var out []decodedBatch
	for _, e := range w.ranks[rank].replaySince(0) {
		out = append(out, decodeBatch(t, e.payload))
	}
	return out
}

func Test_StartValidatesConfig(t *testing.T) {
	tests := []struct {
		name string
		cfg  Config
		want string
	}{
		{"negative workers", Config{Workers: -1}, "workers"},
		{"too many ranks", Config{Workers: 100, DPSize: 100}, "exceeds"},
		{"block size", Config{BlockSize: -3}, "block size"},
		{"cache", Config{CacheBlocks: MaxCacheBlocks + 1}, "cache blocks"},
		{"replay", Config{ReplayBuffer: -1}, "replay buffer"},
		{"encoding", Config{Encoding: Encoding(7)}, "encoding"},
		{"id overflow", Config{Workers: 2, FirstWorkerID: ^uint64(0)}, "overflow"},
		{"endpoint base scheme", Config{EndpointBase: "tcp://127.0.0.1:8093"}, "endpoint base"},
		{"endpoint base host", Config{EndpointBase: "http:///x"}, "endpoint base"},
		{"endpoint base query", Config{EndpointBase: "http://127.0.0.1:8093/?a=b"}, "endpoint base"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := Start(tt.cfg)
			if err == nil {
				_ = s.Close()
				t.Fatal("Start accepted an invalid config")
			}
			if !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error %q, want ErrInvalidConfig mentioning %q", err, tt.want)
			}
		})
	}
}

func Test_ParseEncoding(t *testing.T) {
	tests := []struct {
		in      string
		want    Encoding
		wantErr bool
	}{
		{"array", EncodingArray, false},
		{"MAP", EncodingMap, false},
		{" map ", EncodingMap, false},
		{"json", 0, true},
		{"", 0, true},
	}
	for _, tt := range tests {
		got, err := ParseEncoding(tt.in)
		if (err != nil) != tt.wantErr || got != tt.want {
			t.Errorf("ParseEncoding(%q) = %v, %v", tt.in, got, err)
		}
		if err == nil && got.String() != strings.ToLower(strings.TrimSpace(tt.in)) {
			t.Errorf("%v.String() = %q", got, got.String())
		}
	}
}

func Test_Registration(t *testing.T) {
	s := mustStart(t, Config{Workers: 2, FirstWorkerID: 10, DPSize: 3, BlockSize: 32, Model: "m", Tenant: "t"})
	if len(s.Workers()) != 2 || s.Worker(10) == nil || s.Worker(11) == nil || s.Worker(12) != nil {
		t.Fatalf("workers = %v", s.Workers())
	}
	reg := s.Worker(11).Registration()
	if reg.WorkerID != 11 || reg.ModelName != "m" || reg.TenantID != "t" || reg.BlockSize != 32 ||
		reg.DataParallelStartRank != 0 || reg.DataParallelSize != 3 || reg.Endpoint != "kvsim://127.0.0.1/workers/11" {
		t.Fatalf("registration = %+v", reg)
	}
	if len(reg.KVEventsEndpoints) != 3 {
		t.Fatalf("kv_events_endpoints = %v", reg.KVEventsEndpoints)
	}
	for rank := range 3 {
		ep := reg.KVEventsEndpoints[uint32(rank)]
		if !strings.HasPrefix(ep, "tcp://127.0.0.1:") {
			t.Fatalf("rank %d endpoint %q", rank, ep)
		}
	}
	// Rank r's ROUTER is the registered replay endpoint's port + r.
	base := endpointPort(t, reg.ReplayEndpoint)
	for rank, r := range s.Worker(11).ranks {
		if got := endpointPort(t, r.replayEP); got != base+rank {
			t.Fatalf("rank %d replay port %d, want %d", rank, got, base+rank)
		}
	}
	// Registration returns a copy.
	reg.KVEventsEndpoints[0] = "changed"
	if s.Worker(11).Registration().KVEventsEndpoints[0] == "changed" {
		t.Fatal("Registration shares its map")
	}
}

func endpointPort(t *testing.T, ep string) int {
	t.Helper()
	i := strings.LastIndexByte(ep, ':')
	port, err := strconv.Atoi(ep[i+1:])
	if err != nil {
		t.Fatalf("endpoint %q: %v", ep, err)
	}
	return port
}

// Test_RegistrationEndpoint pins the endpoint a worker registers: its URL
// under the HTTP API that serves it, or a kvsim:// label when none does;
// never a made-up port such as :0.
func Test_RegistrationEndpoint(t *testing.T) {
	tests := []struct {
		name string
		cfg  Config
		want string
	}{
		{"served by the control API", Config{EndpointBase: "http://127.0.0.1:8093"}, "http://127.0.0.1:8093/workers/4"},
		{"trailing slash", Config{EndpointBase: "http://127.0.0.1:8093/"}, "http://127.0.0.1:8093/workers/4"},
		{"with a path", Config{EndpointBase: "https://sim.example:443/kvsim"}, "https://sim.example:443/kvsim/workers/4"},
		{"not served", Config{}, "kvsim://127.0.0.1/workers/4"},
		{"not served, wildcard host", Config{Host: "0.0.0.0"}, "kvsim://127.0.0.1/workers/4"},
		{"not served, IPv6", Config{Host: "::1"}, "kvsim://[::1]/workers/4"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := tt.cfg.withDefaults()
			if err := cfg.validate(); err != nil {
				t.Fatal(err)
			}
			if got := workerEndpoint(cfg, 4); got != tt.want {
				t.Fatalf("endpoint %q, want %q", got, tt.want)
			}
		})
	}
}

func Test_ServePublishesOneBatch(t *testing.T) {
	for _, enc := range []Encoding{EncodingArray, EncodingMap} {
		t.Run(enc.String(), func(t *testing.T) {
			s := mustStart(t, Config{BlockSize: 4, CacheBlocks: 4, Encoding: enc, DPSize: 2})
			w := s.Workers()[0]
			a := seqTokens(100, 10) // two full blocks and two spare tokens
			b := append(seqTokens(100, 8), seqTokens(500, 8)...)
			hashA, hashB := w.EngineHashes(1, a), w.EngineHashes(1, b)

			steps := []struct {
				tokens []uint32
				want   ServeResult
			}{
				{a, ServeResult{Blocks: 2, StoredBlocks: 2}},
				{a, ServeResult{Blocks: 2, CachedBlocks: 2}},                                   // full hit: no message
				{b, ServeResult{Blocks: 4, CachedBlocks: 2, StoredBlocks: 2}},                  // extends a
				{seqTokens(900, 8), ServeResult{Blocks: 2, StoredBlocks: 2, EvictedBlocks: 2}}, // evicts b's leaves
			}
			for i, st := range steps {
				got, err := w.Serve(1, st.tokens)
				if err != nil || got != st.want {
					t.Fatalf("step %d: Serve = %+v, %v; want %+v", i, got, err, st.want)
				}
			}
			if n := w.CachedBlocks(1); n != 4 {
				t.Fatalf("cached blocks = %d", n)
			}
			if last, ok := w.LastSeq(1); !ok || last != 2 {
				t.Fatalf("LastSeq = %d, %v; want 2, true", last, ok)
			}
			if _, ok := w.LastSeq(0); ok {
				t.Fatal("rank 0 published without being served")
			}

			msgs := buffered(t, w, 1)
			if len(msgs) != 3 {
				t.Fatalf("%d messages, want 3", len(msgs))
			}
			first := msgs[0].events[0]
			if msgs[0].rank != 1 || len(msgs[0].events) != 1 || first.typ != "BlockStored" || first.parent != nil ||
				!slices.Equal(first.hashes, hashA) || !slices.Equal(first.tokens, a[:8]) || first.blockSize != 4 || first.medium != "GPU" {
				t.Fatalf("first message = %+v", msgs[0])
			}
			second := msgs[1].events[0]
			if second.parent == nil || *second.parent != hashA[1] || !slices.Equal(second.hashes, hashB[2:]) ||
				!slices.Equal(second.tokens, b[8:16]) {
				t.Fatalf("second message = %+v", msgs[1])
			}
			third := msgs[2]
			if len(third.events) != 2 || third.events[0].typ != "BlockRemoved" || third.events[1].typ != "BlockStored" ||
				!slices.Equal(third.events[0].hashes, []uint64{hashB[3], hashB[2]}) {
				t.Fatalf("third message = %+v", third)
			}
		})
	}
}

func Test_ResetAndRestart(t *testing.T) {
	s := mustStart(t, Config{BlockSize: 2, DPSize: 2})
	w := s.Workers()[0]
	for rank := range 2 {
		if _, err := w.Serve(rank, seqTokens(1, 6)); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Reset(AllRanks); err != nil {
		t.Fatal(err)
	}
	for rank := range 2 {
		msgs := buffered(t, w, rank)
		if len(msgs) != 2 || msgs[1].events[0].typ != "AllBlocksCleared" || w.CachedBlocks(rank) != 0 {
			t.Fatalf("rank %d after reset: %d messages, %d blocks", rank, len(msgs), w.CachedBlocks(rank))
		}
	}

	if _, err := w.Serve(0, seqTokens(1, 6)); err != nil {
		t.Fatal(err)
	}
	if err := w.Restart(0); err != nil {
		t.Fatal(err)
	}
	if _, ok := w.LastSeq(0); ok || w.CachedBlocks(0) != 0 || len(buffered(t, w, 0)) != 0 {
		t.Fatal("restart left a sequence number, blocks or buffered messages")
	}
	res, err := w.Serve(0, seqTokens(1, 6))
	if err != nil || res.CachedBlocks != 0 || res.StoredBlocks != 3 {
		t.Fatalf("serve after restart = %+v, %v", res, err)
	}
	if last, ok := w.LastSeq(0); !ok || last != 0 {
		t.Fatalf("LastSeq after restart = %d, %v; want 0, true", last, ok)
	}
	if last, ok := w.LastSeq(1); !ok || last != 1 {
		t.Fatalf("rank 1 LastSeq = %d, %v; restart of rank 0 must not touch it", last, ok)
	}
}

func Test_UnknownRankAndClosed(t *testing.T) {
	s, err := Start(Config{})
	if err != nil {
		t.Fatal(err)
	}
	w := s.Workers()[0]
	for _, rank := range []int{-2, 1} {
		if _, err := w.Serve(rank, seqTokens(0, 32)); !errors.Is(err, ErrUnknownRank) {
			t.Errorf("Serve(rank %d) = %v", rank, err)
		}
		if err := w.Reset(rank); !errors.Is(err, ErrUnknownRank) {
			t.Errorf("Reset(rank %d) = %v", rank, err)
		}
		w.SkipLive(rank, 3) // ignored
		if n := w.CachedBlocks(rank); n != 0 {
			t.Errorf("CachedBlocks(rank %d) = %d", rank, n)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if _, err := w.Serve(0, seqTokens(0, 32)); !errors.Is(err, ErrClosed) {
		t.Fatalf("Serve after Close = %v", err)
	}
	if err := w.Reset(AllRanks); !errors.Is(err, ErrClosed) {
		t.Fatalf("Reset after Close = %v", err)
	}
}
