package kvsim

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/go-zeromq/zmq4"

	"github.com/kvselect/kvselect/internal/poll"
)

// testTimeout bounds every wait on a socket in these tests.
const testTimeout = 10 * time.Second

// socketReader owns a client socket and the goroutine that receives from
// it; stop (registered as cleanup) closes both.
type socketReader struct {
	sock zmq4.Socket
	msgs chan zmq4.Msg
	done chan struct{}
	wg   sync.WaitGroup
}

func newSocketReader(t *testing.T, sock zmq4.Socket, endpoint string) *socketReader {
	t.Helper()
	r := &socketReader{sock: sock, msgs: make(chan zmq4.Msg, 1024), done: make(chan struct{})}
	t.Cleanup(r.stop)
	if err := sock.Dial(endpoint); err != nil {
		t.Fatalf("dial %s: %v", endpoint, err)
	}
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		for {
			msg, err := sock.Recv()
			if err != nil {
				return
			}
			select {
			case r.msgs <- msg:
			case <-r.done:
				return
			}
		}
	}()
	return r
}

func (r *socketReader) stop() {
	select {
	case <-r.done:
		return
	default:
	}
	close(r.done)
	_ = r.sock.Close()
	r.wg.Wait()
}

// next returns the next message or fails the test after testTimeout.
func (r *socketReader) next(t *testing.T) zmq4.Msg {
	t.Helper()
	select {
	case msg := <-r.msgs:
		return msg
	case <-time.After(testTimeout):
		t.Fatal("timed out waiting for a message")
		return zmq4.Msg{}
	}
}

// mustSubscribe connects a SUB to a rank's PUB and returns once the
// subscription has landed and every message published so far has been
// received. PUB/SUB drops what is published before the subscription
// arrives, so it publishes probes (AllBlocksCleared) until one is seen.
func mustSubscribe(t *testing.T, w *Worker, rank int) *socketReader {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	sub := zmq4.NewSub(ctx)
	if err := sub.SetOption(zmq4.OptionSubscribe, ""); err != nil {
		t.Fatal(err)
	}
	r := newSocketReader(t, sub, w.Registration().KVEventsEndpoints[uint32(rank)])
	var got uint64
	poll.Eventually(t, testTimeout, "the subscription lands", func() error {
		if err := w.Reset(rank); err != nil {
			return poll.Fatal(err)
		}
		select {
		case msg := <-r.msgs:
			got, _, _ = splitLive(t, msg)
			return nil
		case <-time.After(20 * time.Millisecond):
			return errors.New("no probe received")
		}
	})
	last, _ := w.LastSeq(rank)
	for got != last {
		got, _, _ = splitLive(t, r.next(t))
	}
	return r
}

// splitLive checks a live message's frames and returns seq and payload.
func splitLive(t *testing.T, msg zmq4.Msg) (uint64, []byte, []byte) {
	t.Helper()
	if len(msg.Frames) != 3 {
		t.Fatalf("live message has %d frames, want 3", len(msg.Frames))
	}
	if len(msg.Frames[1]) != 8 {
		t.Fatalf("sequence frame is %d bytes", len(msg.Frames[1]))
	}
	return binary.BigEndian.Uint64(msg.Frames[1]), msg.Frames[2], msg.Frames[0]
}

// mustDealer connects a DEALER to a rank's replay endpoint.
func mustDealer(t *testing.T, w *Worker, rank int) *socketReader {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	reg := w.Registration()
	port := endpointPort(t, reg.ReplayEndpoint) + rank
	return newSocketReader(t, zmq4.NewDealer(ctx), tcpEndpoint("127.0.0.1", port))
}

type replayed struct {
	seq     uint64
	payload []byte
}

// requestReplay sends ["", start] and collects the answer up to the end
// marker, checking the frame layout.
func requestReplay(t *testing.T, d *socketReader, start uint64, withTopic bool, topic string) []replayed {
	t.Helper()
	if err := d.sock.SendMulti(zmq4.NewMsgFrom([]byte{}, seqBytes(start))); err != nil {
		t.Fatalf("send replay request: %v", err)
	}
	var out []replayed
	for {
		msg := d.next(t)
		frames := msg.Frames
		want := 3
		if withTopic {
			want = 4
		}
		if len(frames) != want || len(frames[0]) != 0 {
			t.Fatalf("replay reply %q, want %d frames starting with an empty one", frames, want)
		}
		if withTopic {
			if string(frames[1]) != topic {
				t.Fatalf("replay topic %q, want %q", frames[1], topic)
			}
			frames = frames[1:]
		}
		if bytes.Equal(frames[1], replayEndSeq) {
			if len(frames[2]) != 0 {
				t.Fatalf("end marker carries %d bytes", len(frames[2]))
			}
			return out
		}
		out = append(out, replayed{seq: binary.BigEndian.Uint64(frames[1]), payload: frames[2]})
	}
}

func Test_LiveStreamGapReplayAndRestart(t *testing.T) {
	for _, withTopic := range []bool{false, true} {
		t.Run("with_topic="+strconv.FormatBool(withTopic), func(t *testing.T) {
			s := mustStart(t, Config{BlockSize: 4, DPSize: 2, Topic: "kv-test", ReplayWithTopic: withTopic})
			w := s.Workers()[0]
			const rank = 1 // exercises the replay port offset
			sub := mustSubscribe(t, w, rank)
			base, _ := w.LastSeq(rank)

			// Consecutive live messages, 3 frames each.
			for i := range 3 {
				tokens := seqTokens(1000*(i+1), 8)
				if _, err := w.Serve(rank, tokens); err != nil {
					t.Fatal(err)
				}
				seq, payload, topic := splitLive(t, sub.next(t))
				if seq != base+uint64(i)+1 || string(topic) != "kv-test" {
					t.Fatalf("message %d: seq %d topic %q, want seq %d", i, seq, topic, base+uint64(i)+1)
				}
				b := decodeBatch(t, payload)
				if b.rank != rank || b.events[0].typ != "BlockStored" || len(b.events[0].hashes) != 2 {
					t.Fatalf("message %d: %+v", i, b)
				}
			}

			// A skipped message leaves a gap on the live stream...
			w.SkipLive(rank, 1)
			lost := seqTokens(7000, 4)
			if _, err := w.Serve(rank, lost); err != nil {
				t.Fatal(err)
			}
			if _, err := w.Serve(rank, seqTokens(8000, 4)); err != nil {
				t.Fatal(err)
			}
			lostSeq := base + 4
			seq, _, _ := splitLive(t, sub.next(t))
			if seq != lostSeq+1 {
				t.Fatalf("after the skip got seq %d, want %d", seq, lostSeq+1)
			}

			// ...which replay fills, ignoring malformed requests.
			dealer := mustDealer(t, w, rank)
			if err := dealer.sock.SendMulti(zmq4.NewMsgFrom([]byte{}, []byte("bad"))); err != nil {
				t.Fatal(err)
			}
			got := requestReplay(t, dealer, lostSeq, withTopic, "kv-test")
			if len(got) != 2 || got[0].seq != lostSeq || got[1].seq != lostSeq+1 {
				t.Fatalf("replay returned %d messages %+v", len(got), got)
			}
			ev := decodeBatch(t, got[0].payload).events[0]
			if ev.typ != "BlockStored" || ev.hashes[0] != w.EngineHashes(rank, lost)[0] {
				t.Fatalf("replayed event %+v is not the lost store", ev)
			}
			if all := requestReplay(t, dealer, 0, withTopic, "kv-test"); uint64(len(all)) != lostSeq+2 {
				t.Fatalf("replay from 0 returned %d messages, want %d", len(all), lostSeq+2)
			}

			// A restart makes the sequence start over at 0.
			if err := w.Restart(rank); err != nil {
				t.Fatal(err)
			}
			if _, err := w.Serve(rank, seqTokens(1000, 8)); err != nil {
				t.Fatal(err)
			}
			seq, payload, _ := splitLive(t, sub.next(t))
			if seq != 0 {
				t.Fatalf("first seq after restart = %d, want 0", seq)
			}
			if ev := decodeBatch(t, payload).events[0]; ev.typ != "BlockStored" || ev.parent != nil {
				t.Fatalf("first event after restart = %+v, want a root store (cache was emptied)", ev)
			}
			if got := requestReplay(t, dealer, 0, withTopic, "kv-test"); len(got) != 1 || got[0].seq != 0 {
				t.Fatalf("replay after restart = %+v", got)
			}
		})
	}
}

func Test_CloseStopsSockets(t *testing.T) {
	s := mustStart(t, Config{DPSize: 2})
	w := s.Workers()[0]
	dealer := mustDealer(t, w, 0)
	if got := requestReplay(t, dealer, 0, false, ""); len(got) != 0 {
		t.Fatalf("fresh rank replayed %d messages", len(got))
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	// The ports are free again.
	for _, ep := range []string{w.Registration().KVEventsEndpoints[0], w.Registration().ReplayEndpoint} {
		ctx, cancel := context.WithCancel(context.Background())
		sock := zmq4.NewPub(ctx)
		if err := sock.Listen(ep); err != nil {
			t.Errorf("rebind %s after Close: %v", ep, err)
		}
		_ = sock.Close()
		cancel()
	}
}

// Test_ConcurrentServeKeepsOrder checks that sequence numbers reach the
// wire in order and that replay snapshots are gap-free while several
// goroutines serve on one rank.
func Test_ConcurrentServeKeepsOrder(t *testing.T) {
	s := mustStart(t, Config{BlockSize: 2, CacheBlocks: 64})
	w := s.Workers()[0]
	sub := mustSubscribe(t, w, 0)
	dealer := mustDealer(t, w, 0)
	first, _ := w.LastSeq(0)

	const goroutines, perGoroutine = 4, 50
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range perGoroutine {
				// Distinct first blocks, so every prompt stores something.
				if _, err := w.Serve(0, seqTokens(100000*(g+1)+10*i, 6)); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	// Replays taken mid-stream are consecutive from their start.
	for range 5 {
		got := requestReplay(t, dealer, first, false, "")
		for i, m := range got {
			if m.seq != first+uint64(i) {
				t.Fatalf("replay snapshot has seq %d at %d, want %d", m.seq, i, first+uint64(i))
			}
		}
	}
	wg.Wait()

	for want := first + 1; want <= first+goroutines*perGoroutine; want++ {
		if seq, _, _ := splitLive(t, sub.next(t)); seq != want {
			t.Fatalf("live seq %d, want %d", seq, want)
		}
	}
}
