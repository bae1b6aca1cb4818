package ingest

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-zeromq/zmq4"
	"github.com/vmihailenco/msgpack/v5"

	"github.com/kvselect/kvselect/internal/poll"
)

// testPub is a scriptable engine: a PUB socket and a ROUTER replay
// endpoint whose buffer holds every message "published", whether or not it
// went out live. Tests choose sequence numbers freely to script gaps,
// duplicates and restarts.
type testPub struct {
	t         testing.TB
	pub       zmq4.Socket
	router    zmq4.Socket
	endpoint  string
	replayEP  string
	withTopic bool // replay replies carry a topic frame

	mu  sync.Mutex
	buf []message
	// gate, when set, holds every replay answer until it is closed (a
	// stalled replay endpoint).
	gate chan struct{}
	// replies, when set, scripts the answer to a replay request from
	// `from`, given the buffer: whatever it returns is sent as is, before
	// the end marker (a broken or lying replay endpoint).
	replies func(from uint64, buf []message) []message
	// requests counts the replay requests received.
	requests atomic.Int64

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

func newTestPub(t testing.TB, withReplay bool) *testPub {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	p := &testPub{t: t, ctx: ctx, cancel: cancel}
	p.pub = zmq4.NewPub(ctx)
	if err := p.pub.Listen("tcp://127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	p.endpoint = "tcp://" + p.pub.Addr().String()
	if withReplay {
		p.router = zmq4.NewRouter(ctx)
		if err := p.router.Listen("tcp://127.0.0.1:0"); err != nil {
			t.Fatal(err)
		}
		p.replayEP = "tcp://" + p.router.Addr().String()
		p.wg.Add(1)
		go p.serveReplay()
	}
	t.Cleanup(p.close)
	return p
}

func (p *testPub) close() {
	p.cancel()
	p.pub.Close()
	if p.router != nil {
		p.router.Close()
	}
	p.wg.Wait()
}

// publish records a message for replay and, when live, sends it.
func (p *testPub) publish(seq uint64, payload []byte, live bool) {
	p.t.Helper()
	p.mu.Lock()
	p.buf = append(p.buf, message{seq, payload})
	p.mu.Unlock()
	if live {
		p.send(zmq4.NewMsgFrom([]byte("kv-events"), be8(seq), payload))
	}
}

func (p *testPub) send(m zmq4.Msg) {
	p.t.Helper()
	if err := p.pub.Send(m); err != nil {
		p.t.Fatalf("publish: %v", err)
	}
}

// restart forgets the replay buffer, as a restarted engine would.
func (p *testPub) restart() {
	p.mu.Lock()
	p.buf = nil
	p.mu.Unlock()
}

// rebind closes the PUB socket and binds a new one on the same address,
// as a restarted engine does: subscribers lose their connection and dial
// again.
func (p *testPub) rebind() {
	p.t.Helper()
	p.pub.Close()
	p.pub = zmq4.NewPub(p.ctx)
	if err := p.pub.Listen(p.endpoint); err != nil {
		p.t.Fatalf("rebind %s: %v", p.endpoint, err)
	}
}

func (p *testPub) serveReplay() {
	defer p.wg.Done()
	for {
		req, err := p.router.Recv()
		if err != nil {
			return
		}
		f := req.Frames
		if len(f) != 3 || len(f[2]) != 8 {
			continue
		}
		id, from := f[0], binary.BigEndian.Uint64(f[2])
		p.requests.Add(1)
		p.mu.Lock()
		msgs, gate, script := slices.Clone(p.buf), p.gate, p.replies
		p.mu.Unlock()
		if gate != nil {
			select {
			case <-gate:
			case <-p.ctx.Done():
				return
			}
		}
		if script != nil {
			msgs = script(from, msgs)
		} else {
			msgs = slices.DeleteFunc(msgs, func(m message) bool { return m.seq < from })
		}
		p.answer(id, msgs)
	}
}

// holdReplays stalls the replay endpoint: requests are taken, but every
// answer waits until release is called.
func (p *testPub) holdReplays() (release func()) {
	gate := make(chan struct{})
	p.mu.Lock()
	p.gate = gate
	p.mu.Unlock()
	return func() {
		p.mu.Lock()
		p.gate = nil
		p.mu.Unlock()
		close(gate)
	}
}

// scriptReplies makes the replay endpoint answer with replies(from, buf).
func (p *testPub) scriptReplies(replies func(from uint64, buf []message) []message) {
	p.mu.Lock()
	p.replies = replies
	p.mu.Unlock()
}

// answer sends one replay answer. A failed send ends only this answer,
// never the server: the requester may close its DEALER the moment it has
// read the end marker, and zmq4 can report that close on the write of the
// marker's last (empty) frame. Stopping there would leave every later
// replay unanswered.
func (p *testPub) answer(id []byte, msgs []message) {
	for _, m := range msgs {
		frames := [][]byte{id, {}, be8(m.seq), m.payload}
		if p.withTopic {
			frames = [][]byte{id, {}, []byte("kv-events"), be8(m.seq), m.payload}
		}
		if p.router.Send(zmq4.NewMsgFrom(frames...)) != nil {
			return
		}
	}
	_ = p.router.Send(zmq4.NewMsgFrom(id, []byte{}, be8(endOfReplay), []byte{}))
}

// subscribed waits until a subscriber's subscription reached the PUB
// socket, so live messages are no longer lost to the slow joiner.
func (p *testPub) subscribed() {
	p.t.Helper()
	eventually(p.t, "subscription reaches the publisher", func() bool {
		return len(p.pub.(zmq4.Topics).Topics()) > 0
	})
}

func be8(v uint64) []byte { return binary.BigEndian.AppendUint64(nil, v) }

// eventually polls cond until it holds, failing the test after 10 s.
func eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	poll.Eventually(t, 10*time.Second, what, func() error {
		if !cond() {
			return errors.New("not yet")
		}
		return nil
	})
}

// block size of the test partition.
const testBS = 4

// blockTokens returns the tokens of n blocks, distinct per (tag, i).
func blockTokens(tag uint32, n int) []uint32 {
	out := make([]uint32, 0, n*testBS)
	for i := range n * testBS {
		out = append(out, tag*1000+uint32(i))
	}
	return out
}

// storedPayload encodes a batch with one BlockStored event whose engine
// hashes are hashes (chained from parent when non-nil).
func storedPayload(t testing.TB, hashes []uint64, parent *uint64, tokens []uint32) []byte {
	t.Helper()
	var par any
	if parent != nil {
		par = *parent
	}
	return encode(t, []any{1.0, []any{[]any{"BlockStored", hashes, par, tokens, testBS, nil, "GPU"}}, 0})
}

func clearedPayload(t testing.TB) []byte {
	return encode(t, []any{1.0, []any{[]any{"AllBlocksCleared"}}, 0})
}

func encode(t testing.TB, v any) []byte {
	t.Helper()
	var buf bytes.Buffer
	enc := msgpack.NewEncoder(&buf)
	enc.UseCompactInts(true)
	if err := enc.Encode(v); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// freePort returns a loopback TCP port that was free a moment ago.
func freePort(t testing.TB) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}
