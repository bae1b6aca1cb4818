package server_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kvselect/kvselect/api"
	"github.com/kvselect/kvselect/indexer"
	"github.com/kvselect/kvselect/kvsim"
	"github.com/kvselect/kvselect/server"
	"github.com/kvselect/kvselect/server/servertest"
)

// The recovery tests run kvsim workers whose replay buffer holds only
// recReplayBuffer messages per rank, and publish more than that before a
// node starts. A recovering node can therefore only converge through the
// dump: a replay from 0 would find the buffer's start gone and count lost
// messages, which every test checks are zero.
const (
	recBS           = 16
	recReplayBuffer = 8
	recWorkers      = 2
	recRanks        = 2
)

// recFleet is a kvsim fleet registered with a cluster, and the prompts it
// has served.
type recFleet struct {
	t       *testing.T
	sim     *kvsim.Sim
	prompts [][]uint32
	n       int
}

func startRecFleet(t *testing.T, via *server.Server) *recFleet {
	t.Helper()
	sim, err := kvsim.Start(kvsim.Config{Workers: recWorkers, DPSize: recRanks, BlockSize: recBS, CacheBlocks: 24,
		ReplayBuffer: recReplayBuffer})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sim.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := sim.Register(ctx, via.URL()); err != nil {
		t.Fatal(err)
	}
	return &recFleet{t: t, sim: sim}
}

// recPrompt is prompt i: a shared 2-block prefix (one of three), then
// 1 to 4 blocks of its own.
func recPrompt(i int) []uint32 {
	n := 2 + 1 + i%4
	out := make([]uint32, n*recBS)
	for j := range out {
		if j < 2*recBS {
			out[j] = uint32(i%3)<<20 | uint32(j)
		} else {
			out[j] = uint32(i)<<24 | 1<<23 | uint32(j)
		}
	}
	return out
}

// serve runs n new prompts, each on every rank of one worker in turn:
// every message is a BlockStored, with BlockRemoved once the small caches
// evict.
func (f *recFleet) serve(n int) {
	f.t.Helper()
	for range n {
		p := recPrompt(f.n)
		w := f.sim.Workers()[f.n%recWorkers]
		f.n++
		f.prompts = append(f.prompts, p)
		for r := range recRanks {
			if _, err := w.Serve(r, p); err != nil {
				f.t.Fatal(err)
			}
		}
	}
}

// queries are the prompts served so far plus two never served.
func (f *recFleet) queries() [][]uint32 {
	return append(append([][]uint32{}, f.prompts...), recPrompt(1000), recPrompt(1001))
}

// caughtUp reports whether node s has applied every message each rank
// published, with nothing lost, and is no longer recovering.
func (f *recFleet) caughtUp(s *server.Server) error {
	if s.Recovering() {
		return fmt.Errorf("%s is still recovering", s.Node.ID())
	}
	for _, w := range f.sim.Workers() {
		st := s.Ingest.Status(w.ID())
		for r := range recRanks {
			want, ok := w.LastSeq(r)
			l, has := st[uint32(r)]
			switch {
			case !has:
				return fmt.Errorf("%s has no listener for worker %d rank %d", s.Node.ID(), w.ID(), r)
			case l.LostMessages != 0 || l.Restarts != 0:
				return fmt.Errorf("%s worker %d rank %d: %d lost, %d restarts", s.Node.ID(), w.ID(), r, l.LostMessages, l.Restarts)
			case ok && (!l.HasSeq || l.LastSeq != want):
				return fmt.Errorf("%s worker %d rank %d at seq %d (has %v), engine at %d", s.Node.ID(), w.ID(), r, l.LastSeq, l.HasSeq, want)
			case l.State != "active":
				return fmt.Errorf("%s worker %d rank %d listener %s", s.Node.ID(), w.ID(), r, l.State)
			}
		}
	}
	return nil
}

// overlapRows is a node's whole /overlap_scores answer for a prompt.
func overlapRows(s *server.Server, tokens []uint32) (string, error) {
	body, _ := json.Marshal(map[string]any{"token_ids": tokens})
	resp, err := http.Post(s.URL()+api.PathOverlapScores, "application/json", bytes.NewReader(body))
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("%s: /overlap_scores %d %s", s.Node.ID(), resp.StatusCode, raw)
	}
	return string(raw), err
}

// waitIdentical waits until every node has applied every message and
// answers /overlap_scores with the same rows as the first one for every
// query; it returns how many rows held cached blocks, so a test can tell
// it compared something.
//
// A message published before a node's SUB subscription lands is lost to
// PUB/SUB, and the node notices the gap (and replays it) only when the
// next message arrives. So while a node lags, every nudgeAfter the fleet
// publishes one more message on every rank, as a busy engine would.
func (f *recFleet) waitIdentical(nodes ...*server.Server) int {
	f.t.Helper()
	const nudgeAfter = 300 * time.Millisecond
	hits := 0
	lagging := time.Now()
	servertest.Eventually(f.t, "every node caught up with identical overlap rows", func() error {
		hits = 0
		for _, s := range nodes {
			if err := f.caughtUp(s); err != nil {
				if time.Since(lagging) > nudgeAfter {
					f.serve(recWorkers)
					lagging = time.Now()
				}
				return err
			}
		}
		for _, q := range f.queries() {
			want, err := overlapRows(nodes[0], q)
			if err != nil {
				return err
			}
			var rows api.OverlapScores
			if err := json.Unmarshal([]byte(want), &rows); err != nil {
				return err
			}
			for _, row := range rows.Workers {
				if row.DeviceBlocks > 0 {
					hits++
				}
			}
			for _, s := range nodes[1:] {
				got, err := overlapRows(s, q)
				if err != nil {
					return err
				}
				if got != want {
					return fmt.Errorf("%s answers\n%s\n%s answers\n%s", nodes[0].Node.ID(), want, s.Node.ID(), got)
				}
			}
		}
		return nil
	})
	if hits == 0 {
		f.t.Fatal("no query hit a cached block: the comparison proves nothing")
	}
	return hits
}

// warmCluster starts a 3-node cluster (mutate applies to every node, and
// to nodes added later), registers the fleet, and serves enough traffic
// that the replay buffers no longer reach back to sequence 0.
func warmCluster(t *testing.T, mutate func(i int, cfg *server.Config)) (*servertest.Cluster, *recFleet) {
	t.Helper()
	c := servertest.StartCluster(t, 3, mutate)
	f := startRecFleet(t, c.Leader())
	servertest.Eventually(t, "every node follows every rank", func() error {
		for _, s := range c.Live() {
			if got := len(s.Ingest.Ranks()); got != recWorkers*recRanks {
				return fmt.Errorf("%s has %d listeners", s.Node.ID(), got)
			}
			for _, w := range f.sim.Workers() {
				for r, l := range s.Ingest.Status(w.ID()) {
					if l.State != "active" || !w.Subscribed(int(r)) {
						return fmt.Errorf("%s worker %d rank %d not subscribed", s.Node.ID(), w.ID(), r)
					}
				}
			}
		}
		return nil
	})
	// In rounds shorter than the replay buffers: a listener whose
	// subscription lands late recovers a round from the buffer, and none
	// loses a message before the test begins.
	for range 3 * recReplayBuffer / 2 {
		f.serve(recWorkers * 2) // 2 messages per rank
		f.waitIdentical(c.Live()...)
	}
	return c, f
}

// Test_RecoveryOnJoin: a node that joins after traffic loads a member's
// dump and replays the rest, then answers exactly as the others.
func Test_RecoveryOnJoin(t *testing.T) {
	c, f := warmCluster(t, nil)
	n4 := c.Add(c.Leader().URL())
	f.waitIdentical(append(c.Live()[:3], n4)...)
	// Traffic after the recovery reaches it like any node.
	f.serve(3)
	f.waitIdentical(c.Live()...)
}

// Test_RecoveryOnRestart: a node restarted on its data dir (its catalog
// comes back from Raft, its index does not) recovers from a member's dump
// and replays what was published while it was down.
func Test_RecoveryOnRestart(t *testing.T) {
	c, f := warmCluster(t, nil)
	i := c.Index(c.Followers()[0])
	c.Stop(i)
	f.serve(2) // 2 messages per rank: within the replay buffers
	c.Restart(i)
	f.waitIdentical(c.Live()...)
}

// Test_RecoveryFallsBackWhenPeerDiesMidDump: the first indexer peer
// answers a complete partition that is wrong (a block no worker holds, a
// watermark far ahead) and then dies; the node loads the next peer's dump
// and ends up exactly like the others, nothing of the first left behind.
func Test_RecoveryFallsBackWhenPeerDiesMidDump(t *testing.T) {
	var mu sync.Mutex
	var peers []string
	c, f := warmCluster(t, func(i int, cfg *server.Config) {
		if i == 3 {
			mu.Lock()
			cfg.Recovery.Peers = peers
			mu.Unlock()
		}
	})
	bogus := make([]uint32, recBS) // a block no worker ever stored
	for j := range bogus {
		bogus[j] = 0x7f000000 | uint32(j)
	}
	local := indexer.BlockHashes(bogus, recBS, "")
	w := f.sim.Workers()[0]
	dying := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		rw.Header().Set(api.HeaderIndex, "1")
		rw.WriteHeader(http.StatusOK)
		fmt.Fprintf(rw, `{"%s:%s":{"model_name":%q,"tenant_id":%q,"block_size":%d,"events":[`+
			`{"worker_id":%d,"storage_tier":"device","event":{"event_id":1,"dp_rank":0,"data":{"stored":{"parent_hash":null,"blocks":[{"block_hash":77,"tokens_hash":%d}]}}}}],`+
			`"watermarks":[{"worker_id":%d,"dp_rank":0,"seq":999999}]},"other:default":{"block_size":16,"events":[`,
			kvsim.DefaultName, kvsim.DefaultName, kvsim.DefaultName, kvsim.DefaultName, recBS, w.ID(), local[0], w.ID())
		rw.(http.Flusher).Flush()
		panic(http.ErrAbortHandler) // the peer dies mid-dump
	}))
	defer dying.Close()
	mu.Lock()
	peers = []string{dying.URL, c.Leader().URL()}
	mu.Unlock()
	n4 := c.Add(c.Leader().URL())
	f.waitIdentical(append(c.Live()[:3], n4)...)
	got, err := overlapRows(n4, bogus)
	if err != nil {
		t.Fatal(err)
	}
	if want, _ := overlapRows(c.Leader(), bogus); got != want || !strings.Contains(want, `"device_blocks":0`) {
		t.Fatalf("the dead peer's block survived on %s:\n%s\nthe leader answers\n%s", n4.Node.ID(), got, want)
	}
}

// warnings collects the warnings a node logs.
type warnings struct {
	mu   sync.Mutex
	msgs []string
}

func (w *warnings) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelWarn }
func (w *warnings) Handle(_ context.Context, r slog.Record) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.msgs = append(w.msgs, r.Message)
	return nil
}
func (w *warnings) WithAttrs([]slog.Attr) slog.Handler { return w }
func (w *warnings) WithGroup(string) slog.Handler      { return w }

func (w *warnings) has(sub string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, m := range w.msgs {
		if strings.Contains(m, sub) {
			return true
		}
	}
	return false
}

// Test_RecoveryWithoutPeersStartsEmpty: no indexer peer answers; the node
// warns, starts with an empty index and follows its workers.
func Test_RecoveryWithoutPeersStartsEmpty(t *testing.T) {
	dead := httptest.NewServer(http.NotFoundHandler())
	deadURL := dead.URL
	dead.Close() // connection refused from now on
	var warn warnings
	cfg := servertest.Config("n1", t.TempDir())
	cfg.Logger = slog.New(&warn)
	cfg.Recovery.Peers = []string{deadURL}
	cfg.Recovery.MembersWait = 300 * time.Millisecond
	s := servertest.MustStart(t, cfg)
	f := startRecFleet(t, s)
	servertest.Eventually(t, "recovery gives up and the listeners start", func() error {
		if !warn.has("no peer answered in time") {
			return fmt.Errorf("no warning yet")
		}
		return f.caughtUp(s)
	})
	f.serve(2)
	f.waitIdentical(s)
	if code, body := get(t, s.URL()+api.PathReady); code != http.StatusOK || !strings.Contains(body, `"recovering":false`) {
		t.Fatalf("/ready: %d %s", code, body)
	}
}

// Test_RecoveringUntilTheDumpArrives: while the peer holds its answer, the
// node says recovering in /ready and its listeners wait; once the dump
// arrives both change. The dump request carries the node's token.
func Test_RecoveringUntilTheDumpArrives(t *testing.T) {
	release := make(chan struct{})
	asked := make(chan string, 1)
	peer := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		asked <- r.Header.Get("Authorization")
		<-release
		rw.Header().Set(api.HeaderContentEncoding, api.EncodingGzip)
		zw, _ := gzipWriter(rw)
		_, _ = io.WriteString(zw, "{}")
		_ = zw.Close()
	}))
	defer peer.Close()
	defer close(release) // before peer.Close, should the test fail early
	cfg := servertest.Config("n1", t.TempDir())
	cfg.AuthToken = "s3cret"
	cfg.Recovery.Peers = []string{peer.URL}
	s := servertest.MustStart(t, cfg)
	if auth := <-asked; auth != "Bearer s3cret" {
		t.Fatalf("dump request Authorization %q", auth)
	}
	var ready api.Ready
	_, body := get(t, s.URL()+api.PathReady)
	if err := json.Unmarshal([]byte(body), &ready); err != nil || !ready.Recovering || !s.Ingest.Held() {
		t.Fatalf("while the dump is held: /ready %s, listeners held %v", body, s.Ingest.Held())
	}
	release <- struct{}{}
	servertest.Eventually(t, "recovery ends", func() error {
		_, body := get(t, s.URL()+api.PathReady)
		if !strings.Contains(body, `"recovering":false`) || s.Ingest.Held() {
			return fmt.Errorf("/ready %s", body)
		}
		return nil
	})
}

func gzipWriter(w io.Writer) (*gzip.Writer, error) { return gzip.NewWriter(w), nil }

// Test_RecoveryDumpNothingPlacedIsNoEmptyPeer: a peer whose dump holds
// events only for a partition this node does not know is not a peer with
// an empty index (which would let the node start empty at once): it is
// asked again until ServingWait, and the node then warns.
func Test_RecoveryDumpNothingPlacedIsNoEmptyPeer(t *testing.T) {
	asked := make(chan struct{}, 100)
	peer := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		asked <- struct{}{}
		fmt.Fprint(rw, `{"unknown-model:default":{"block_size":16,"events":[`+
			`{"worker_id":9,"storage_tier":"device","event":{"event_id":1,"dp_rank":0,"data":{"stored":{"parent_hash":null,"blocks":[{"block_hash":77,"tokens_hash":78}]}}}}],`+
			`"watermarks":[{"worker_id":9,"dp_rank":0,"seq":5}]}}`)
	}))
	defer peer.Close()
	var warn warnings
	cfg := servertest.Config("n1", t.TempDir())
	cfg.Logger = slog.New(&warn)
	cfg.Recovery.Peers = []string{peer.URL}
	cfg.Recovery.ServingWait = 500 * time.Millisecond
	s := servertest.MustStart(t, cfg)
	servertest.Eventually(t, "recovery gives up on the peer", func() error {
		if s.Recovering() {
			return fmt.Errorf("still recovering")
		}
		return nil
	})
	if !warn.has("no dump loaded in time") {
		t.Fatalf("no warning that the dumps never loaded; warnings: %v", warn.msgs)
	}
	if len(asked) < 2 {
		t.Fatalf("the peer was asked %d times: it must be asked again", len(asked))
	}
}
