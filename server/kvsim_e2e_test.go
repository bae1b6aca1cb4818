package server_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/kvselect/kvselect/internal/poll"
	"github.com/kvselect/kvselect/kvsim"
	"github.com/kvselect/kvselect/server"
	"github.com/kvselect/kvselect/server/servertest"
)

// e2e is one kvselect node and a kvsim fleet on loopback, the workers
// registered through the HTTP API as Ray would.
type e2e struct {
	t   *testing.T
	srv *server.Server
	sim *kvsim.Sim
}

const e2eBS = 16

func startE2E(t *testing.T, enc kvsim.Encoding, workers int) *e2e {
	t.Helper()
	srv := servertest.MustStart(t, servertest.Config("n1", t.TempDir()))
	sim, err := kvsim.Start(kvsim.Config{Workers: workers, BlockSize: e2eBS, CacheBlocks: 64, Encoding: enc})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sim.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := sim.Register(ctx, srv.URL()); err != nil {
		t.Fatal(err)
	}
	e := &e2e{t: t, srv: srv, sim: sim}
	e.eventually("every listener is active and subscribed", func() bool {
		for _, w := range sim.Workers() {
			if !w.Subscribed(0) {
				return false
			}
		}
		return len(e.listenerStates("active")) == workers
	})
	return e
}

// eventually waits until cond holds, failing after 10 s (poll.Eventually).
func (e *e2e) eventually(what string, cond func() bool) {
	e.t.Helper()
	poll.Eventually(e.t, 10*time.Second, what, func() error {
		if !cond() {
			return errors.New("not yet")
		}
		return nil
	})
}

type listenerJSON struct {
	State        string `json:"state"`
	LastSeq      uint64 `json:"last_seq"`
	Gaps         uint64 `json:"gaps"`
	LostMessages uint64 `json:"lost_messages"`
	Restarts     uint64 `json:"restarts"`
}

// listeners returns rank 0's listener of every worker, from GET /workers.
func (e *e2e) listeners() map[uint64]listenerJSON {
	e.t.Helper()
	_, body := get(e.t, e.srv.URL()+"/workers")
	var ws []struct {
		WorkerID  uint64                  `json:"worker_id"`
		Listeners map[string]listenerJSON `json:"listeners"`
	}
	if err := json.Unmarshal([]byte(body), &ws); err != nil {
		e.t.Fatalf("GET /workers: %v: %s", err, body)
	}
	out := map[uint64]listenerJSON{}
	for _, w := range ws {
		if l, ok := w.Listeners["0"]; ok {
			out[w.WorkerID] = l
		}
	}
	return out
}

func (e *e2e) listenerStates(state string) []uint64 {
	var ids []uint64
	for id, l := range e.listeners() {
		if l.State == state {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	return ids
}

type selection struct {
	WorkerID uint64 `json:"worker_id"`
	Overlap  struct {
		GPU int `json:"gpu"`
	} `json:"overlap"`
}

func tokensJSON(tokens []uint32) string {
	parts := make([]string, len(tokens))
	for i, t := range tokens {
		parts[i] = strconv.FormatUint(uint64(t), 10)
	}
	return "[" + strings.Join(parts, ",") + "]"
}

func (e *e2e) selectFor(tokens []uint32) selection {
	e.t.Helper()
	code, body := post(e.t, e.srv.URL()+"/select", `{"token_ids":`+tokensJSON(tokens)+`}`)
	if code != http.StatusOK {
		e.t.Fatalf("/select: %d %s", code, body)
	}
	var s selection
	if err := json.Unmarshal([]byte(body), &s); err != nil {
		e.t.Fatal(err)
	}
	return s
}

// cached returns each worker's overlap in tokens for a prompt, from
// /overlap_scores.
func (e *e2e) cached(tokens []uint32) map[uint64]int {
	e.t.Helper()
	code, body := post(e.t, e.srv.URL()+"/overlap_scores", `{"token_ids":`+tokensJSON(tokens)+`}`)
	if code != http.StatusOK {
		e.t.Fatalf("/overlap_scores: %d %s", code, body)
	}
	var res struct {
		Workers []struct {
			WorkerID     uint64 `json:"worker_id"`
			DeviceBlocks int    `json:"device_blocks"`
		} `json:"workers"`
	}
	if err := json.Unmarshal([]byte(body), &res); err != nil {
		e.t.Fatal(err)
	}
	out := map[uint64]int{}
	for _, s := range res.Workers {
		if s.DeviceBlocks > 0 {
			out[s.WorkerID] = max(out[s.WorkerID], s.DeviceBlocks*e2eBS)
		}
	}
	return out
}

func (e *e2e) serve(worker uint64, tokens []uint32) kvsim.ServeResult {
	e.t.Helper()
	res, err := e.sim.Worker(worker).Serve(0, tokens)
	if err != nil {
		e.t.Fatal(err)
	}
	return res
}

// waitCached waits until /overlap_scores shows exactly want for tokens.
func (e *e2e) waitCached(what string, tokens []uint32, want map[uint64]int) {
	e.t.Helper()
	var got map[uint64]int
	e.eventually(what, func() bool {
		got = e.cached(tokens)
		return fmt.Sprint(got) == fmt.Sprint(want)
	})
}

// prompt returns n blocks of tokens, distinct per tag.
func prompt(tag uint32, n int) []uint32 {
	out := make([]uint32, n*e2eBS)
	for i := range out {
		out[i] = tag<<16 | uint32(i)
	}
	return out
}

func TestKVSimSelectionFollowsCaches(t *testing.T) {
	for _, enc := range []kvsim.Encoding{kvsim.EncodingArray, kvsim.EncodingMap} {
		t.Run(enc.String(), func(t *testing.T) {
			e := startE2E(t, enc, 3)
			p := prompt(1, 4)
			if s := e.selectFor(p); s.Overlap.GPU != 0 {
				t.Fatalf("cold selection has overlap %d", s.Overlap.GPU)
			}
			e.serve(2, p)
			e.waitCached("worker 2 holds the prompt", p, map[uint64]int{2: 64})
			if s := e.selectFor(p); s.WorkerID != 2 || s.Overlap.GPU != 64 {
				t.Fatalf("selection %+v, want worker 2 with 64 cached tokens", s)
			}
			// A prompt sharing 2 blocks with p, then 2 of its own, served on 3.
			q := append(slices.Clone(p[:2*e2eBS]), prompt(2, 2)...)
			e.serve(3, q)
			e.waitCached("worker 3 holds q", q, map[uint64]int{2: 32, 3: 64})
			if s := e.selectFor(q); s.WorkerID != 3 || s.Overlap.GPU != 64 {
				t.Fatalf("selection for q %+v, want worker 3 with 64", s)
			}
			// p extended by two blocks: worker 2 still has the longest prefix.
			r := append(slices.Clone(p), prompt(3, 2)...)
			if s := e.selectFor(r); s.WorkerID != 2 || s.Overlap.GPU != 64 {
				t.Fatalf("selection for r %+v, want worker 2 with 64", s)
			}
			// AllBlocksCleared from worker 2.
			if err := e.sim.Worker(2).Reset(0); err != nil {
				t.Fatal(err)
			}
			e.waitCached("worker 2's blocks are gone", p, map[uint64]int{3: 32})
		})
	}
}

func TestKVSimEvictionRemovesBlocks(t *testing.T) {
	e := startE2E(t, kvsim.EncodingArray, 1)
	// The cache holds 64 blocks: four 16-block prompts fill it, a fifth
	// evicts the least recently used one.
	var ps [][]uint32
	for i := range 5 {
		ps = append(ps, prompt(uint32(10+i), 16))
		res := e.serve(1, ps[i])
		if i == 4 && res.EvictedBlocks != 16 {
			t.Fatalf("fifth prompt evicted %d blocks, want 16", res.EvictedBlocks)
		}
	}
	e.waitCached("last prompt indexed", ps[4], map[uint64]int{1: 256})
	e.waitCached("evicted prompt removed", ps[0], map[uint64]int{})
	for _, p := range ps[1:] {
		if got := e.cached(p); got[1] != 256 {
			t.Fatalf("a prompt still in the cache shows %v", got)
		}
	}
}

func TestKVSimEngineRestartClearsRank(t *testing.T) {
	e := startE2E(t, kvsim.EncodingArray, 1)
	w := e.sim.Worker(1)
	p, q := prompt(1, 4), prompt(2, 4)
	e.serve(1, p)
	e.serve(1, prompt(3, 1))
	e.waitCached("p indexed", p, map[uint64]int{1: 64})
	// The engine restarts: no AllBlocksCleared, its sequence starts at 0.
	if err := w.Restart(0); err != nil {
		t.Fatal(err)
	}
	e.serve(1, q)
	e.waitCached("q indexed after the restart", q, map[uint64]int{1: 64})
	if got := e.cached(p); len(got) != 0 {
		t.Fatalf("blocks from before the restart survived: %v", got)
	}
	if l := e.listeners()[1]; l.Restarts != 1 || l.LastSeq != 0 {
		t.Fatalf("listener %+v, want 1 restart and last seq 0", l)
	}
}

func TestKVSimDroppedMessagesRecoveredByReplay(t *testing.T) {
	e := startE2E(t, kvsim.EncodingArray, 1)
	w := e.sim.Worker(1)
	a, b, c := prompt(1, 2), prompt(2, 2), prompt(3, 2)
	e.serve(1, a)
	e.waitCached("a indexed", a, map[uint64]int{1: 32})
	// The next two messages never reach the SUB socket.
	w.SkipLive(0, 2)
	e.serve(1, b)
	e.serve(1, c)
	d := prompt(4, 2)
	e.serve(1, d)
	e.waitCached("d indexed", d, map[uint64]int{1: 32})
	for _, p := range [][]uint32{b, c} {
		if got := e.cached(p); got[1] != 32 {
			t.Fatalf("a skipped message was not recovered: %v", got)
		}
	}
	if l := e.listeners()[1]; l.Gaps != 1 || l.LostMessages != 0 || l.LastSeq != 3 {
		t.Fatalf("listener %+v, want 1 gap, nothing lost, last seq 3", l)
	}
}

func TestKVSimDeletedWorkerBlocksDisappear(t *testing.T) {
	e := startE2E(t, kvsim.EncodingArray, 2)
	p := prompt(1, 4)
	e.serve(1, p)
	e.serve(2, p)
	e.waitCached("both hold p", p, map[uint64]int{1: 64, 2: 64})
	req, _ := http.NewRequest(http.MethodDelete, e.srv.URL()+"/workers/1", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("DELETE: %d", resp.StatusCode)
	}
	// The delete's side effects are done when it returns.
	if got := e.cached(p); fmt.Sprint(got) != fmt.Sprint(map[uint64]int{2: 64}) {
		t.Fatalf("after delete: %v", got)
	}
	if _, ok := e.listeners()[1]; ok {
		t.Fatalf("deleted worker still has a listener")
	}
	// Its engine keeps publishing; nothing comes back.
	e.serve(1, prompt(2, 1))
	e.serve(2, prompt(3, 1))
	e.waitCached("worker 2 still indexed", prompt(3, 1), map[uint64]int{2: 16})
	if got := e.cached(prompt(2, 1)); len(got) != 0 {
		t.Fatalf("deleted worker's new blocks were indexed: %v", got)
	}
}
