package ingest

import (
	"bytes"
	"encoding/binary"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kvselect/kvselect/indexer"
	"github.com/kvselect/kvselect/internal/zmqx"
)

// seqPayload is the batch published as sequence number seq in these
// tests: one root block of its own tokens (seqTokens), padded with an
// ignored trailing event field to about pad bytes.
func seqPayload(t testing.TB, seq uint64, pad int) []byte {
	ev := []any{"BlockStored", []uint64{1000 + seq}, nil, seqTokens(seq), testBS, nil, "GPU", nil, nil, 0, nil}
	if pad > 0 {
		ev = append(ev, make([]byte, pad))
	}
	return encode(t, []any{1.0, []any{ev}, 0})
}

func seqTokens(seq uint64) []uint32 { return blockTokens(uint32(10+seq), 1) }

func (h *harness) metric(name, label string) float64 {
	h.t.Helper()
	return gather(h.t, h.m.Collectors(), name, label)
}

// TestQueueOverflowIsAGap: while a listener cannot keep up (its replay
// endpoint stalls, or applying is slow), live messages queue up to
// QueueLen messages and QueueBytes bytes; the rest are dropped and
// counted. Once it catches up, the drop is a gap like any other: replayed
// when there is a replay endpoint, else counted lost. Nothing is applied
// out of order, the watermark moves past the gap, and the queue is empty.
func TestQueueOverflowIsAGap(t *testing.T) {
	const last = 40 // sequence numbers 0..last are published
	tests := []struct {
		name   string
		replay bool
		cfg    func(*Config)
		pad    int // bytes of padding in each live message
		// stall makes the listener stop taking messages off its queue at
		// stalledAt: it returns when that has happened and how to resume.
		stall     func(h *harness, p *testPub) (stalled func() bool, resume func())
		stalledAt uint64
	}{
		{
			name: "stalled replay, byte bound", replay: true, pad: 64 << 10,
			cfg: func(c *Config) { c.QueueBytes = 256 << 10; c.ReplayTimeout = time.Minute },
			// Seq 1 never goes out live: seq 2 reveals the gap and its
			// replay stalls.
			stall: func(h *harness, p *testPub) (func() bool, func()) {
				resume := p.holdReplays()
				return func() bool { return p.requests.Load() == 2 }, resume
			},
			stalledAt: 2,
		},
		{
			name: "slow apply without replay, message bound", pad: 100,
			cfg: func(c *Config) { c.QueueLen = 4; c.Threads = 1 },
			// The test takes the only apply slot: the listener waits in
			// the apply of seq 1.
			stall: func(h *harness, p *testPub) (func() bool, func()) {
				h.m.acquire()
				return func() bool { return h.status(1).Messages == 2 }, h.m.release
			},
			stalledAt: 1,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarnessWith(t, tt.cfg)
			p := newTestPub(t, tt.replay)
			h.register(1, p.endpoint, p.replayEP)
			p.subscribed()
			p.publish(0, seqPayload(t, 0, tt.pad), true)
			h.waitSeq(1, 0)

			stalled, resumeOnce := tt.stall(h, p)
			var once sync.Once
			resume := func() { once.Do(resumeOnce) }
			t.Cleanup(resume) // a failing test must not leave the listener stuck
			// Up to the stalled message, then, once the listener is stuck
			// there, the rest: they fill the queue in order, and what does
			// not fit is dropped.
			for seq := uint64(1); seq <= tt.stalledAt; seq++ {
				p.publish(seq, seqPayload(t, seq, tt.pad), !tt.replay || seq != 1)
			}
			eventually(t, "the listener is stalled", stalled)
			for seq := tt.stalledAt + 1; seq <= last; seq++ {
				p.publish(seq, seqPayload(t, seq, tt.pad), true)
			}
			behind := last - tt.stalledAt // live messages after the stalled one
			eventually(t, "every live message queued or dropped", func() bool {
				st := h.status(1)
				return uint64(st.QueuedMessages)+st.DroppedQueueFull == behind
			})
			st := h.status(1)
			cfg := h.m.cfg
			if st.QueuedMessages > cfg.QueueLen || st.QueuedBytes > cfg.QueueBytes || st.QueuedBytesPeak > cfg.QueueBytes {
				t.Fatalf("queue holds %d messages, %d bytes (peak %d); bounds %d, %d",
					st.QueuedMessages, st.QueuedBytes, st.QueuedBytesPeak, cfg.QueueLen, cfg.QueueBytes)
			}
			if st.DroppedQueueFull == 0 || st.QueuedMessages == 0 {
				t.Fatalf("%d queued, %d dropped: the test wants both", st.QueuedMessages, st.DroppedQueueFull)
			}
			if got := h.metric("kvselect_kv_messages_total", "dropped_queue_full"); got != float64(st.DroppedQueueFull) {
				t.Fatalf("dropped_queue_full metric %v, status %d", got, st.DroppedQueueFull)
			}
			if got := h.metric("kvselect_kv_queued_bytes", ""); got != float64(st.QueuedBytes) {
				t.Fatalf("queued bytes metric %v, status %d", got, st.QueuedBytes)
			}
			// The live messages past the queued ones were dropped.
			firstDropped := tt.stalledAt + 1 + uint64(st.QueuedMessages)
			dropped := st.DroppedQueueFull

			resume()
			h.waitSeq(1, last)
			st = h.status(1)
			wantLost := map[bool]uint64{false: dropped, true: 0}[tt.replay]
			if st.LostMessages != wantLost || st.State != StateActive || st.LastSeq != last ||
				st.QueuedMessages != 0 || st.QueuedBytes != 0 || st.Restarts != 0 || st.ReplayFailures != 0 {
				t.Fatalf("after the stall: %+v; want %d lost, active at %d, empty queue", st, wantLost, last)
			}
			if got := h.metric("kvselect_kv_queued_bytes", ""); got != 0 {
				t.Fatalf("queued bytes metric %v after the stall", got)
			}
			for seq := uint64(0); seq <= last; seq++ {
				want := uint32(1)
				if !tt.replay && seq >= firstDropped {
					want = 0
				}
				if got := h.held(1, seqTokens(seq)); got != want {
					t.Fatalf("block of seq %d: held %d, want %d", seq, got, want)
				}
			}
			// The live stream goes on from there, the loss counted once.
			p.publish(last+1, seqPayload(t, last+1, 0), true)
			h.waitSeq(1, last+1)
			if st := h.status(1); st.LostMessages != wantLost || h.held(1, seqTokens(last+1)) != 1 {
				t.Fatalf("after the next live message: %+v", st)
			}
		})
	}
}

// TestReplayRepliesOutsideTheAskedRange: a replay endpoint that answers
// outside the range asked for — below the start, far ahead, duplicates,
// backwards, with holes — is refused from that reply on and counted; the
// replay fails, what it did not deliver is lost, the watermark never
// passes the live stream, and later live messages apply. A well-behaved
// endpoint that sends its whole buffer (vLLM) stops at the live message.
func TestReplayRepliesOutsideTheAskedRange(t *testing.T) {
	const bogusSeq = 1_000_000_000
	bogus := blockTokens(99, 1)
	// Live: 0, 1, 2. Off the wire: 3..6. Live: 7, which asks [3, 7).
	tests := []struct {
		name         string
		answer       []uint64 // sequence numbers the replay endpoint answers with
		wantReplayed []uint64 // of 3..6, those whose blocks the index gets
		wantRejected uint64
		wantLost     uint64
	}{
		{"below the start", []uint64{1, 3, 4, 5, 6}, nil, 1, 4},
		{"far ahead", []uint64{bogusSeq}, nil, 1, 4},
		{"far ahead after a good one", []uint64{3, bogusSeq}, []uint64{3}, 1, 3},
		{"duplicate", []uint64{3, 3, 4, 5, 6}, []uint64{3}, 1, 3},
		{"backwards", []uint64{4, 3, 5, 6}, []uint64{4}, 1, 3},
		{"hole", []uint64{3, 5, 6}, []uint64{3}, 1, 3},
		{"the whole buffer and beyond", []uint64{3, 4, 5, 6, 7, 8, bogusSeq}, []uint64{3, 4, 5, 6}, 0, 0},
		{"a buffer that no longer reaches back", []uint64{5, 6, 7}, []uint64{5, 6}, 0, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t)
			p := newTestPub(t, true)
			h.register(1, p.endpoint, p.replayEP)
			p.subscribed()
			for seq := range uint64(3) {
				p.publish(seq, seqPayload(t, seq, 0), true)
			}
			h.waitSeq(1, 2)
			p.scriptReplies(func(from uint64, buf []message) []message {
				var out []message
				for _, seq := range tt.answer {
					m := message{seq: seq, payload: encode(t, []any{1.0, []any{[]any{"BlockStored", []uint64{999}, nil, bogus, testBS}}, 0})}
					for _, b := range buf {
						if b.seq == seq {
							m = b
						}
					}
					out = append(out, m)
				}
				return out
			})
			for seq := uint64(3); seq <= 6; seq++ {
				p.publish(seq, seqPayload(t, seq, 0), false)
			}
			p.publish(7, seqPayload(t, 7, 0), true)
			h.waitSeq(1, 7)

			st := h.status(1)
			wantFailures := min(tt.wantRejected, 1)
			if st.ReplayRejected != tt.wantRejected || st.ReplayFailures != wantFailures || st.LostMessages != tt.wantLost ||
				st.LastSeq != 7 || st.State != StateActive || st.Restarts != 0 {
				t.Fatalf("status %+v; want %d rejected, %d failed, %d lost, active at 7",
					st, tt.wantRejected, wantFailures, tt.wantLost)
			}
			if tt.wantRejected > 0 && !strings.Contains(st.LastError, errReplyOutOfRange.Error()) {
				t.Fatalf("last error %q does not say why the replay failed", st.LastError)
			}
			if got := h.metric("kvselect_kv_messages_total", "replay_rejected"); got != float64(tt.wantRejected) {
				t.Fatalf("replay_rejected metric %v, want %d", got, tt.wantRejected)
			}
			for seq := uint64(3); seq <= 6; seq++ {
				want := uint32(0)
				for _, r := range tt.wantReplayed {
					if r == seq {
						want = 1
					}
				}
				if got := h.held(1, seqTokens(seq)); got != want {
					t.Fatalf("block of seq %d: held %d, want %d", seq, got, want)
				}
			}
			if h.held(1, bogus) != 0 {
				t.Fatal("a refused reply reached the index")
			}
			// The listener follows the live stream as before.
			p.publish(8, seqPayload(t, 8, 0), true)
			p.publish(9, seqPayload(t, 9, 0), true)
			h.waitSeq(1, 9)
			if st := h.status(1); st.LostMessages != tt.wantLost || h.held(1, seqTokens(7)) != 1 || h.held(1, seqTokens(9)) != 1 {
				t.Fatalf("live messages after the replay: %+v", st)
			}
		})
	}
}

// TestReplayOnConnectRunningAheadIsUndone: the replay on connect has no
// live message to bound it yet, so a lying endpoint can move a new
// listener far ahead. The live stream's first message, below everything
// that replay applied, reads as a restart: the rank is cleared and
// follows the live stream from there.
func TestReplayOnConnectRunningAheadIsUndone(t *testing.T) {
	bogus := blockTokens(99, 1)
	h := newHarness(t)
	p := newTestPub(t, true)
	p.scriptReplies(func(uint64, []message) []message {
		return []message{{seq: 1e9, payload: encode(t, []any{1.0, []any{[]any{"BlockStored", []uint64{999}, nil, bogus, testBS}}, 0})}}
	})
	h.register(1, p.endpoint, p.replayEP)
	h.waitSeq(1, 1e9)
	p.subscribed()
	for seq := range uint64(3) {
		p.publish(seq, seqPayload(t, seq, 0), true)
	}
	h.waitSeq(1, 2)
	st := h.status(1)
	if h.held(1, bogus) != 0 || h.held(1, seqTokens(0)) != 1 || h.held(1, seqTokens(2)) != 1 || st.Restarts != 1 || st.State != StateActive {
		t.Fatalf("after the live stream: %+v, bogus block held %d", st, h.held(1, bogus))
	}
}

// zmtpPub is a fake publisher that completes the ZMTP handshake and then
// announces a frame of `frame` bytes, on every connection.
func zmtpPub(t *testing.T, frame uint64) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	greeting := make([]byte, 64)
	greeting[0], greeting[9], greeting[10] = 0xff, 0x7f, 3
	copy(greeting[12:], "NULL")
	ready := append([]byte{5}, "READY"...)
	ready = append(ready, 11)
	ready = append(ready, "Socket-Type"...)
	ready = binary.BigEndian.AppendUint32(ready, 3)
	ready = append(ready, "PUB"...)
	header := binary.BigEndian.AppendUint64([]byte{0x02}, frame) // a long message frame
	script := bytes.Join([][]byte{greeting, {0x04, byte(len(ready))}, ready, header}, nil)

	var wg sync.WaitGroup
	var mu sync.Mutex
	var conns []net.Conn
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, _ = c.Write(script)
				_, _ = io.Copy(io.Discard, c) // until the listener hangs up or the test ends
			}()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	return "tcp://" + ln.Addr().String()
}

// TestOversizeFrameIsCounted: a frame past zmqx.MaxFrameBytes (SPEC §11)
// is never read; the connection is cut, counted, and the listener
// reconnects with backoff.
func TestOversizeFrameIsCounted(t *testing.T) {
	h := newHarness(t)
	h.register(1, zmtpPub(t, zmqx.MaxFrameBytes+1), "")
	sawError := false
	eventually(t, "two connections cut for an oversize frame", func() bool {
		st := h.status(1)
		sawError = sawError || (st.State == StateFailed && strings.Contains(st.LastError, zmqx.ErrFrameTooLarge.Error()))
		return st.DroppedOversize >= 2 && sawError
	})
	if got := h.metric("kvselect_kv_messages_total", "dropped_oversize"); got < 2 {
		t.Fatalf("dropped_oversize metric %v", got)
	}
	if st := h.status(1); st.Messages != 0 || st.HasSeq {
		t.Fatalf("status %+v: nothing should have been applied", st)
	}
	if _, ok := h.ix.Watermark(indexer.RankKey{Worker: 1}); ok {
		t.Fatal("watermark set without a message")
	}
}
