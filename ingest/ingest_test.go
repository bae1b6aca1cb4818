package ingest

import (
	"encoding/binary"
	"io"
	"log/slog"
	"strconv"
	"testing"
	"time"

	"github.com/go-zeromq/zmq4"

	"github.com/kvselect/kvselect/fsm"
	"github.com/kvselect/kvselect/indexer"
)

// harness is one node's ingestion path without Raft: a catalog log whose
// observers are the indexer and the listener manager, as on a node.
type harness struct {
	t   *testing.T
	ix  *indexer.Indexer
	m   *Manager
	log *fsm.Log
	bs  uint32 // block size of registered workers
}

func newHarness(t *testing.T) *harness { return newHarnessWith(t, func(*Config) {}) }

// newHarnessWith is newHarness with the manager's configuration adjusted.
func newHarnessWith(t *testing.T, mutate func(*Config)) *harness {
	t.Helper()
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	ix := indexer.New(quiet)
	cfg := Config{BackoffMin: 5 * time.Millisecond, BackoffMax: 50 * time.Millisecond,
		ReplayTimeout: 5 * time.Second, Logger: quiet}
	mutate(&cfg)
	m := New(ix, cfg)
	t.Cleanup(m.Close)
	return &harness{t: t, ix: ix, m: m, log: fsm.NewLog(ix.ApplyCatalog, m.ApplyCatalog), bs: testBS}
}

func (h *harness) register(id uint64, endpoint, replay string) {
	h.t.Helper()
	_, err := h.log.Upsert(fsm.Worker{WorkerID: id, Endpoint: "http://worker", BlockSize: h.bs,
		DataParallelSize: 1, KVEventsEndpoints: map[uint32]string{0: endpoint}, ReplayEndpoint: replay})
	if err != nil {
		h.t.Fatal(err)
	}
}

func (h *harness) remove(id uint64) {
	h.t.Helper()
	if _, err := h.log.Apply(fsm.DeleteWorker{WorkerID: id}); err != nil {
		h.t.Fatal(err)
	}
}

// held is how many leading blocks of tokens worker id holds on device.
func (h *harness) held(id uint64, tokens []uint32) uint32 {
	q := indexer.BlockHashes(tokens, int(h.bs), "")
	ovs, _, err := h.ix.Match(fsm.PartitionKey{Model: fsm.DefaultScope, Tenant: fsm.DefaultScope}, q, nil)
	if err != nil {
		return 0
	}
	for _, o := range ovs {
		if o.Worker == id {
			return o.Device
		}
	}
	return 0
}

func (h *harness) status(id uint64) RankStatus {
	return h.m.Status(id)[0]
}

func (h *harness) waitSeq(id, seq uint64) {
	h.t.Helper()
	eventually(h.t, "watermark reaches the sequence number", func() bool {
		got, ok := h.ix.Watermark(indexer.RankKey{Worker: id})
		return ok && got == seq
	})
}

func TestInOrderApplyAndGapRecoveredByReplay(t *testing.T) {
	h := newHarness(t)
	p := newTestPub(t, true)
	h.register(1, p.endpoint, p.replayEP)
	a, b, c := blockTokens(1, 2), blockTokens(2, 1), blockTokens(3, 1)
	// Published before the listener is subscribed: only replay-on-connect
	// can deliver it.
	p.publish(0, storedPayload(t, []uint64{10, 11}, nil, a), true)
	h.waitSeq(1, 0)
	p.subscribed()
	if got := h.held(1, a); got != 2 {
		t.Fatalf("held %d blocks of a, want 2", got)
	}
	// Seq 1 and 2 are lost on the wire; 3 reveals the gap.
	p.publish(1, storedPayload(t, []uint64{20}, nil, b), false)
	p.publish(2, clearedPayload(t), false)
	p.publish(3, storedPayload(t, []uint64{30}, nil, c), true)
	h.waitSeq(1, 3)
	if h.held(1, a) != 0 || h.held(1, b) != 0 || h.held(1, c) != 1 {
		t.Fatalf("after replayed clear: a %d b %d c %d, want 0 0 1", h.held(1, a), h.held(1, b), h.held(1, c))
	}
	st := h.status(1)
	if st.Gaps != 1 || st.LostMessages != 0 || st.State != StateActive || st.LastSeq != 3 {
		t.Fatalf("status %+v, want 1 gap, 0 lost, active, last 3", st)
	}
	// Live messages after the replay continue normally.
	p.publish(4, storedPayload(t, []uint64{40, 41}, nil, a), true)
	h.waitSeq(1, 4)
	if h.held(1, a) != 2 || h.status(1).Restarts != 0 {
		t.Fatalf("live after replay: held %d restarts %d", h.held(1, a), h.status(1).Restarts)
	}
}

func TestGapWithoutReplayIsCountedLoss(t *testing.T) {
	h := newHarness(t)
	p := newTestPub(t, false)
	h.register(1, p.endpoint, "")
	p.subscribed()
	a := blockTokens(1, 1)
	p.publish(0, storedPayload(t, []uint64{10}, nil, a), true)
	p.publish(3, storedPayload(t, []uint64{11}, nil, blockTokens(2, 1)), true)
	h.waitSeq(1, 3)
	if st := h.status(1); st.LostMessages != 2 || st.Gaps != 1 {
		t.Fatalf("status %+v, want 2 lost in 1 gap", st)
	}
}

func TestEngineRestartClearsRank(t *testing.T) {
	for _, withReplay := range []bool{false, true} {
		t.Run(map[bool]string{false: "no replay", true: "replay"}[withReplay], func(t *testing.T) {
			h := newHarness(t)
			p := newTestPub(t, withReplay)
			h.register(1, p.endpoint, p.replayEP)
			p.subscribed()
			old, fresh0, fresh1 := blockTokens(1, 3), blockTokens(2, 1), blockTokens(3, 1)
			for seq := range uint64(5) {
				p.publish(seq, storedPayload(t, []uint64{100 + seq}, nil, blockTokens(9, 1)), true)
			}
			p.publish(5, storedPayload(t, []uint64{1, 2, 3}, nil, old), true)
			h.waitSeq(1, 5)
			// The engine restarts: its counter starts over, and its first
			// message (seq 0) went out before we noticed.
			p.restart()
			p.publish(0, storedPayload(t, []uint64{7}, nil, fresh0), false)
			p.publish(1, storedPayload(t, []uint64{8}, nil, fresh1), true)
			h.waitSeq(1, 1)
			if h.held(1, old) != 0 {
				t.Fatalf("blocks from before the restart survived")
			}
			if h.held(1, fresh1) != 1 {
				t.Fatalf("first live message after the restart not applied")
			}
			wantFresh0 := map[bool]uint32{false: 0, true: 1}[withReplay]
			if got := h.held(1, fresh0); got != wantFresh0 {
				t.Fatalf("message 0 of the restarted engine: held %d, want %d (recovered only by replay)", got, wantFresh0)
			}
			if st := h.status(1); st.Restarts != 1 {
				t.Fatalf("restarts %d, want 1", st.Restarts)
			}
		})
	}
}

// An engine that restarts unseen — while the connection is down, or while
// its messages are lost — and counts past the last sequence number applied
// gives itself away only by its replay: the payload at that number is not
// the one applied. The rank must be cleared and rebuilt from the new
// engine's replay, as a node that saw the restart live does; carrying on
// from last+1 would keep the old engine's blocks on this node alone.
func TestUnseenEngineRestartCaughtByReplay(t *testing.T) {
	for _, tc := range []struct {
		name string
		// away makes the listener miss engine B's first messages, already
		// in B's replay buffer, and then find them.
		away func(p *testPub)
	}{
		{"gap", func(p *testPub) {
			p.publish(5, storedPayload(t, []uint64{25}, nil, blockTokens(25, 1)), true)
		}},
		{"reconnect", func(p *testPub) {
			p.rebind()
			p.subscribed()
			p.publish(5, storedPayload(t, []uint64{25}, nil, blockTokens(25, 1)), true)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			p := newTestPub(t, true)
			h.register(1, p.endpoint, p.replayEP)
			p.subscribed()
			old := blockTokens(1, 3)
			p.publish(0, storedPayload(t, []uint64{1, 2, 3}, nil, old), true)
			for seq := uint64(1); seq <= 2; seq++ {
				p.publish(seq, storedPayload(t, []uint64{10 + seq}, nil, blockTokens(10+uint32(seq), 1)), true)
			}
			h.waitSeq(1, 2)
			if h.held(1, old) != 3 {
				t.Fatal("engine A's blocks not indexed")
			}
			// Engine B: a new counter, none of A's blocks, and messages
			// 0..4 that this listener never received live.
			p.restart()
			for seq := range uint64(5) {
				p.publish(seq, storedPayload(t, []uint64{20 + seq}, nil, blockTokens(20+uint32(seq), 1)), false)
			}
			tc.away(p)
			h.waitSeq(1, 5)
			if got := h.held(1, old); got != 0 {
				t.Fatalf("engine A's blocks survived B's unseen restart: held %d", got)
			}
			for seq := uint32(0); seq <= 5; seq++ {
				if got := h.held(1, blockTokens(20+seq, 1)); got != 1 {
					t.Fatalf("engine B's message %d: held %d, want 1", seq, got)
				}
			}
			if st := h.status(1); st.Restarts != 1 || st.LostMessages != 0 {
				t.Fatalf("status %+v, want 1 restart, nothing lost", st)
			}
		})
	}
}

func TestReplayReplyWithTopicFrame(t *testing.T) {
	h := newHarness(t)
	p := newTestPub(t, true)
	p.withTopic = true
	a := blockTokens(1, 2)
	p.publish(0, storedPayload(t, []uint64{1}, nil, a[:testBS]), false)
	parent := uint64(1)
	p.publish(1, storedPayload(t, []uint64{2}, &parent, a[testBS:]), false)
	h.register(1, p.endpoint, p.replayEP)
	h.waitSeq(1, 1)
	if got := h.held(1, a); got != 2 {
		t.Fatalf("held %d, want 2 (chained through the parent hash)", got)
	}
}

func TestBadFramesAndPayloadsAreCountedNotFatal(t *testing.T) {
	h := newHarness(t)
	p := newTestPub(t, false)
	h.register(1, p.endpoint, "")
	p.subscribed()
	p.send(zmq4.NewMsgFrom([]byte("kv-events"), be8(0)))                                        // 2 frames
	p.send(zmq4.NewMsgFrom([]byte("kv-events"), []byte{1, 2, 3}, []byte{0x90}))                 // short seq
	p.publish(0, []byte{0xc1, 0xff}, true)                                                      // not msgpack
	p.publish(1, encode(t, []any{1.0, []any{[]any{"Bogus"}, []any{"AllBlocksCleared"}}}), true) // one bad event
	a := blockTokens(1, 1)
	p.publish(2, storedPayload(t, []uint64{5}, nil, a), true)
	h.waitSeq(1, 2)
	st := h.status(1)
	if st.DroppedFrames != 2 || st.DroppedMalformed != 1 || st.LostMessages != 0 || h.held(1, a) != 1 {
		t.Fatalf("status %+v held %d; want 2 dropped frames, 1 malformed batch, no loss, block held", st, h.held(1, a))
	}
}

func TestListenerFollowsCatalog(t *testing.T) {
	h := newHarness(t)
	// Registered before its engine is up: the listener fails and retries.
	port := freePort(t)
	h.register(1, "tcp://127.0.0.1:"+strconv.Itoa(port), "")
	eventually(t, "listener reports the failed connection", func() bool {
		st := h.status(1)
		return st.State == StateFailed && st.LastError != ""
	})
	p := newTestPub(t, true)
	a := blockTokens(1, 1)
	p.publish(0, storedPayload(t, []uint64{5}, nil, a), false)
	// Patching the endpoint restarts the listener on the new one.
	h.register(1, p.endpoint, p.replayEP)
	h.waitSeq(1, 0)
	if st := h.status(1); st.State != StateActive || h.held(1, a) != 1 {
		t.Fatalf("after patch: %+v held %d", st, h.held(1, a))
	}
	// A second engine at another endpoint: the rank is cleared first.
	p2 := newTestPub(t, true)
	b := blockTokens(2, 1)
	p2.publish(0, storedPayload(t, []uint64{6}, nil, b), false)
	h.register(1, p2.endpoint, p2.replayEP)
	eventually(t, "new engine's block indexed", func() bool { return h.held(1, b) == 1 })
	if h.held(1, a) != 0 {
		t.Fatalf("old engine's block survived the endpoint change")
	}
	// Deleting the worker stops its listener and drops its blocks.
	h.remove(1)
	if len(h.m.Ranks()) != 0 || h.m.Status(1) != nil || h.held(1, b) != 0 {
		t.Fatalf("after delete: listeners %v, blocks %d", h.m.Ranks(), h.held(1, b))
	}
}

func TestDPRankOverride(t *testing.T) {
	h := newHarness(t)
	p0, p1 := newTestPub(t, false), newTestPub(t, false)
	_, err := h.log.Upsert(fsm.Worker{WorkerID: 1, Endpoint: "http://w", BlockSize: testBS, DataParallelSize: 2,
		KVEventsEndpoints: map[uint32]string{0: p0.endpoint, 1: p1.endpoint}})
	if err != nil {
		t.Fatal(err)
	}
	p0.subscribed()
	a := blockTokens(1, 1)
	// Rank 0's socket carries a batch that says it is rank 1's.
	p0.publish(0, encode(t, []any{1.0, []any{[]any{"BlockStored", []uint64{5}, nil, a, testBS}}, 1}), true)
	eventually(t, "override applied", func() bool {
		ovs, _, _ := h.ix.Match(fsm.PartitionKey{Model: "default", Tenant: "default"}, indexer.BlockHashes(a, testBS, ""), nil)
		return len(ovs) == 1 && ovs[0].Rank == 1
	})
	if seq, ok := h.ix.Watermark(indexer.RankKey{Worker: 1, Rank: 0}); !ok || seq != 0 {
		t.Fatalf("listener rank watermark %d %v, want 0", seq, ok)
	}
}

// FuzzReplyFrames checks the replay reply parser on arbitrary frames: it
// never panics and accepts only the two documented shapes.
func FuzzReplyFrames(f *testing.F) {
	f.Add([]byte{}, []byte("kv-events"), be8(5), []byte{0x90}, 4)
	f.Add([]byte{}, be8(endOfReplay), []byte{}, []byte{}, 3)
	f.Add([]byte("x"), []byte("y"), []byte("z"), []byte{}, 2)
	f.Fuzz(func(t *testing.T, a, b, c, d []byte, n int) {
		frames := [][]byte{a, b, c, d}[:min(max(n, 0), 4)]
		m, end, ok := replyMessage(frames)
		if !ok {
			return
		}
		body := frames
		if len(body) > 0 && len(body[0]) == 0 {
			body = body[1:]
		}
		if len(body) != 2 && len(body) != 3 {
			t.Fatalf("accepted %d frames after the delimiter", len(body))
		}
		seqFrame := body[len(body)-2]
		if len(seqFrame) != 8 || m.seq != binary.BigEndian.Uint64(seqFrame) || end != (m.seq == endOfReplay) {
			t.Fatalf("bad parse of %x: %+v end=%v", frames, m, end)
		}
	})
}
