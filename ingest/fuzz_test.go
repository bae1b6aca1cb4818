package ingest

import (
	"context"
	"log/slog"
	"testing"

	"github.com/go-zeromq/zmq4"

	"github.com/kvselect/kvselect/fsm"
	"github.com/kvselect/kvselect/indexer"
)

// Bounds of the fuzzed listener's queue: small, so scripts reach them.
const (
	fuzzQueueLen   = 3
	fuzzQueueBytes = 256
)

// fuzzListener is a listener of an indexed rank with no sockets and no
// replay endpoint; tests drive its queue and run loop by hand.
func fuzzListener(t *testing.T) (*listener, *indexer.Indexer) {
	t.Helper()
	quiet := slog.New(slog.DiscardHandler)
	ix := indexer.New(quiet)
	ep := "tcp://127.0.0.1:1"
	if _, err := fsm.NewLog(ix.ApplyCatalog).Upsert(fsm.Worker{WorkerID: 1, Endpoint: "http://w", BlockSize: testBS,
		DataParallelSize: 1, KVEventsEndpoints: map[uint32]string{0: ep}}); err != nil {
		t.Fatal(err)
	}
	m := New(ix, Config{Logger: quiet, QueueLen: fuzzQueueLen, QueueBytes: fuzzQueueBytes})
	t.Cleanup(m.Close)
	return newListener(m, spec{rk: indexer.RankKey{Worker: 1}, endpoint: ep}), ix
}

// fuzzMessage reads one live message off a fuzz script:
//
//	op%4 == 0: seq (1 byte), a valid batch storing that seq's block
//	op%4 == 1: seq (8 bytes), n (1 byte), a payload of 4n zero bytes (malformed)
//	op%4 == 3: (op>>2)%5 frames, each of the length in the next byte, %16
//
// op%4 == 2 is not a message (the caller drains the queue).
func fuzzMessage(t *testing.T, op byte, script []byte) (zmq4.Msg, []byte) {
	next := func() byte {
		if len(script) == 0 {
			return 0
		}
		b := script[0]
		script = script[1:]
		return b
	}
	topic := []byte("kv-events")
	switch op % 4 {
	case 0:
		seq := uint64(next())
		return zmq4.NewMsgFrom(topic, be8(seq), storedPayload(t, []uint64{seq}, nil, seqTokens(seq))), script
	case 1:
		var seq [8]byte
		for i := range seq {
			seq[i] = next()
		}
		return zmq4.NewMsgFrom(topic, seq[:], make([]byte, 4*int(next()))), script
	}
	frames := make([][]byte, int(op>>2)%5)
	for i := range frames {
		frames[i] = make([]byte, int(next())%16)
	}
	return zmq4.NewMsgFrom(frames...), script
}

// FuzzLiveFrames feeds a listener arbitrary live messages — well-formed or
// not, any sequence numbers (gaps, restarts, ff×8), any sizes — with its
// run loop draining the queue at arbitrary points. Whatever the input:
// no panic; the queue within its bounds; every message accounted for
// once (applied, a dropped frame, or dropped for lack of room); and the
// watermark, in the listener and the index, a sequence number the live
// stream showed.
func FuzzLiveFrames(f *testing.F) {
	f.Add([]byte{0, 0, 0, 1, 0, 2, 2})
	f.Fuzz(func(t *testing.T, script []byte) {
		if len(script) > 4096 {
			return
		}
		l, ix := fuzzListener(t)
		ctx := context.Background()
		var pushed int
		shown := map[uint64]bool{}
		for len(script) > 0 {
			op := script[0]
			script = script[1:]
			if op%4 == 2 {
				l.drain(ctx)
			} else {
				var msg zmq4.Msg
				msg, script = fuzzMessage(t, op, script)
				if seq, ok := liveSeq(msg.Frames); ok {
					shown[seq] = true
				}
				if l.q.push(msg) {
					l.count(func(s *RankStatus) { s.DroppedQueueFull++ })
				}
				pushed++
			}
			if n, bytes, _ := l.q.usage(); n > fuzzQueueLen || (n > 1 && bytes > fuzzQueueBytes) {
				t.Fatalf("queue holds %d messages, %d bytes", n, bytes)
			}
			wm, ok := ix.Watermark(l.spec.rk)
			if ok != l.t.hasLast || (ok && (wm != l.t.last || !shown[wm])) {
				t.Fatalf("watermark %d (%v), listener at %d (%v): not a sequence number the live stream showed",
					wm, ok, l.t.last, l.t.hasLast)
			}
		}
		l.drain(ctx)
		st := l.snapshot()
		if st.QueuedMessages != 0 || st.QueuedBytes != 0 {
			t.Fatalf("drained queue holds %d messages, %d bytes", st.QueuedMessages, st.QueuedBytes)
		}
		if got := st.Messages + st.DroppedFrames + st.DroppedQueueFull; got != uint64(pushed) {
			t.Fatalf("%d messages pushed, %d accounted for: %+v", pushed, got, st)
		}
		if st.HasSeq && (!l.t.hasLast || st.LastSeq != l.t.last) {
			t.Fatalf("status at %d, listener at %d", st.LastSeq, l.t.last)
		}
	})
}
