package zmqx

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"
)

// frame builds one ZMTP frame.
func frame(flags byte, body []byte) []byte {
	if len(body) > 255 {
		h := make([]byte, 9)
		h[0] = flags | flagLong
		binary.BigEndian.PutUint64(h[1:], uint64(len(body)))
		return append(h, body...)
	}
	return append([]byte{flags, byte(len(body))}, body...)
}

func longHeader(flags byte, size uint64) []byte {
	h := make([]byte, 9)
	h[0] = flags | flagLong
	binary.BigEndian.PutUint64(h[1:], size)
	return h
}

func greeting() []byte {
	g := make([]byte, greetingBytes)
	g[0], g[9], g[10] = 0xff, 0x7f, 3
	copy(g[12:], "NULL")
	return g
}

// readyCmd is a NULL-mechanism READY command announcing a socket type.
func readyCmd(sockType string) []byte {
	body := append([]byte{5}, "READY"...)
	body = append(body, 11)
	body = append(body, "Socket-Type"...)
	body = binary.BigEndian.AppendUint32(body, uint32(len(sockType)))
	body = append(body, sockType...)
	return frame(flagCommand, body)
}

func TestGuardFraming(t *testing.T) {
	valid := bytes.Join([][]byte{
		greeting(), readyCmd("PUB"),
		frame(flagMore, []byte("topic")), frame(flagMore, make([]byte, 8)), frame(0, make([]byte, 1000)),
		frame(0, nil),
	}, nil)
	tests := []struct {
		name   string
		stream []byte
		want   error
	}{
		{"valid stream", valid, nil},
		{"frame at the limit", append(slices(greeting(), readyCmd("PUB")), longHeader(0, MaxFrameBytes)...), nil},
		{"frame over the limit", append(slices(greeting(), readyCmd("PUB")), longHeader(0, MaxFrameBytes+1)...), ErrFrameTooLarge},
		{"absurd frame size", append(slices(greeting(), readyCmd("PUB")), longHeader(0, 1<<62)...), ErrFrameTooLarge},
		{"command over the limit", append(greeting(), longHeader(flagCommand, 1<<40)...), ErrFrameTooLarge},
		{"too many frames", append(slices(greeting(), readyCmd("PUB")), bytes.Repeat(frame(flagMore, []byte("x")), MaxMessageFrames+1)...), ErrFrameTooLarge},
		{"reserved flag bits", append(slices(greeting(), readyCmd("PUB")), 0x80, 0), ErrBadFraming},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// Every split of the stream into two reads must give the same answer.
			for cut := 0; cut <= len(tt.stream); cut += 1 + len(tt.stream)/97 {
				g := zmtpGuard{greeting: greetingBytes}
				err := g.feed(tt.stream[:cut])
				if err == nil {
					err = g.feed(tt.stream[cut:])
				}
				if !errors.Is(err, tt.want) && (err != nil || tt.want != nil) {
					t.Fatalf("cut %d: err = %v, want %v", cut, err, tt.want)
				}
				if tt.want == nil && !g.handshook {
					t.Fatalf("cut %d: handshake not seen", cut)
				}
			}
		})
	}
}

func slices(parts ...[]byte) []byte { return bytes.Join(parts, nil) }

// TestGuardedSubRefusesHugeFrame runs a fake publisher that completes the
// ZMTP handshake and then announces a 2^50-byte frame. A guarded zmq4 SUB
// must report an error from Recv instead of allocating (which would kill
// the process).
func TestGuardedSubRefusesHugeFrame(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var wg sync.WaitGroup
	defer wg.Wait()
	done := make(chan struct{})
	defer close(done)
	wg.Add(1)
	go func() {
		defer wg.Done()
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		go io.Copy(io.Discard, c)
		c.Write(greeting())
		c.Write(readyCmd("PUB"))
		c.Write(longHeader(0, 1<<50))
		<-done
	}()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	sub, err := DialSub(ctx, "tcp://"+ln.Addr().String(), nil)
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	defer sub.Close()
	if _, err := sub.Recv(); !errors.Is(err, ErrFrameTooLarge) {
		t.Fatalf("Recv err = %v, want ErrFrameTooLarge", err)
	}
}

func TestRankEndpoint(t *testing.T) {
	tests := []struct {
		base string
		rank uint32
		want string
		err  bool
	}{
		{"tcp://w:5560", 0, "tcp://w:5560", false},
		{"tcp://w:5560", 3, "tcp://w:5563", false},
		{"tcp://[::1]:5560", 1, "tcp://[::1]:5561", false},
		{"ipc:///tmp/replay", 2, "ipc:///tmp/replay_dp2", false},
		{"tcp://w:65535", 1, "", true},
		{"tcp://w", 1, "", true},
		{"udp://w:1", 1, "", true},
	}
	for _, tt := range tests {
		got, err := RankEndpoint(tt.base, tt.rank)
		if (err != nil) != tt.err || got != tt.want {
			t.Errorf("RankEndpoint(%q, %d) = %q, %v; want %q, err %v", tt.base, tt.rank, got, err, tt.want, tt.err)
		}
	}
}

func TestGuardedSchemes(t *testing.T) {
	for _, ep := range []string{"tcp://127.0.0.1:1", "ipc:///tmp/x"} {
		if _, err := Guarded(ep); err != nil {
			t.Errorf("Guarded(%q): %v", ep, err)
		}
	}
	for _, ep := range []string{"inproc://x", "udp://1.2.3.4:5", "nonsense", "tcp://"} {
		if _, err := Guarded(ep); !errors.Is(err, ErrEndpoint) {
			t.Errorf("Guarded(%q) err = %v, want ErrEndpoint", ep, err)
		}
	}
}

// TestDialErrorShowsTheUsersEndpoint: a failed dial names the endpoint as
// registered, never the guarded transport's internal scheme.
func TestDialErrorShowsTheUsersEndpoint(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens: the dial is refused
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	sub, err := DialSub(ctx, "tcp://"+addr, nil)
	if err == nil {
		sub.Close()
		t.Fatal("dial of a closed port succeeded")
	}
	if msg := err.Error(); strings.Contains(msg, schemeTCP) || !strings.Contains(msg, "tcp://"+addr) {
		t.Fatalf("dial error %q", msg)
	}
	if errors.Unwrap(err) == nil {
		t.Fatal("the dial error no longer wraps zmq4's")
	}
}

// FuzzGuard feeds arbitrary byte streams, split at an arbitrary point, to
// the framing guard. It must never panic, must give the same verdict
// however the reads split the stream, and must never let a frame header
// past the limits.
func FuzzGuard(f *testing.F) {
	valid := slices(greeting(), readyCmd("PUB"), frame(flagMore, []byte("t")), frame(flagMore, make([]byte, 8)), frame(0, []byte{0x90}))
	f.Add(valid, 7)
	f.Add(append(slices(greeting(), readyCmd("PUB")), longHeader(0, 1<<40)...), 70)
	f.Add(append(greeting(), 0x80), 64)
	f.Fuzz(func(t *testing.T, stream []byte, cut int) {
		if cut < 0 || cut > len(stream) {
			cut = len(stream) / 2
		}
		whole := zmtpGuard{greeting: greetingBytes}
		werr := whole.feed(stream)
		split := zmtpGuard{greeting: greetingBytes}
		serr := split.feed(stream[:cut])
		if serr == nil {
			serr = split.feed(stream[cut:])
		}
		if (werr == nil) != (serr == nil) {
			t.Fatalf("verdict depends on the split: whole %v, split at %d %v", werr, cut, serr)
		}
		if werr == nil && (whole.body > MaxFrameBytes || whole.msgFrames > MaxMessageFrames) {
			t.Fatalf("guard passed a frame past the limits: %+v", whole)
		}
	})
}

// slowConn is a net.Conn whose writes take delay each.
type slowConn struct {
	net.Conn
	delay  time.Duration
	closed bool
}

func (c *slowConn) Write(p []byte) (int, error)      { time.Sleep(c.delay); return len(p), nil }
func (c *slowConn) SetWriteDeadline(time.Time) error { return nil }
func (c *slowConn) Close() error                     { c.closed = true; return nil }

// Test_SlowReaderCut: a peer that reads, but keeps the writer waiting most
// of the time, is cut off like one that stopped reading; one that keeps up
// is not.
func Test_SlowReaderCut(t *testing.T) {
	defer func(w time.Duration) { slowWindow = w }(slowWindow)
	slowWindow = 100 * time.Millisecond
	for _, tt := range []struct {
		name  string
		delay time.Duration
		cut   bool
	}{
		{"keeps up", 0, false},
		{"waits most of the time", 10 * time.Millisecond, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			sc := &slowConn{delay: tt.delay}
			c := &guardConn{Conn: sc}
			var err error
			for i := 0; i < 30 && err == nil; i++ {
				_, err = c.Write([]byte("frame"))
			}
			if cut := errors.Is(err, ErrStalled); cut != tt.cut || sc.closed != tt.cut {
				t.Fatalf("cut %v (err %v, closed %v), want %v", cut, err, sc.closed, tt.cut)
			}
		})
	}
}

// chunkConn serves a byte stream in the chunks given, then err, and
// counts the reads it answers.
type chunkConn struct {
	net.Conn
	chunks [][]byte
	err    error
	reads  int
}

func (c *chunkConn) Read(p []byte) (int, error) {
	c.reads++
	if len(c.chunks) == 0 {
		return 0, c.err
	}
	n := copy(p, c.chunks[0])
	if c.chunks[0] = c.chunks[0][n:]; len(c.chunks[0]) == 0 {
		c.chunks = c.chunks[1:]
	}
	return n, nil
}
func (c *chunkConn) SetDeadline(time.Time) error { return nil }
func (c *chunkConn) Close() error                { return nil }

// Test_GuardConnBufferedReads: reads through the connection's buffer pass
// on the same bytes, in order, as unbuffered reads would, whatever sizes
// the reader asks for; frames before a violation are passed on and the
// violation is reported where its bytes are reached; the connection's
// error comes after its data; and a message of small frames costs one
// read of the connection, not one per header and body.
func Test_GuardConnBufferedReads(t *testing.T) {
	msg := slices(frame(flagMore, []byte("kv-events")), frame(flagMore, make([]byte, 8)), frame(0, bytes.Repeat([]byte{7}, 300)))
	stream := slices(greeting(), readyCmd("PUB"), msg, msg, msg)
	huge := slices(greeting(), readyCmd("PUB"), msg, longHeader(0, MaxFrameBytes+1))
	for _, tt := range []struct {
		name    string
		chunks  [][]byte
		sizes   []int // read sizes, cycled
		want    []byte
		wantErr error
		prefix  bool // got may stop short of want: a read that reaches a violation passes nothing on
	}{
		{"zmq4's pattern: header then body", [][]byte{stream}, []int{2, 9, 8, 300}, stream, io.EOF, false},
		{"one byte at a time", [][]byte{stream}, []int{1}, stream, io.EOF, false},
		{"large reads bypass the buffer", [][]byte{stream[:10], stream[10:]}, []int{readBufBytes}, stream, io.EOF, false},
		{"stream split oddly", [][]byte{stream[:1], stream[1:70], stream[70:71], stream[71:]}, []int{3, 64, 2}, stream, io.EOF, false},
		{"violation after good frames", [][]byte{huge}, []int{2, 9, 300}, huge[:len(huge)-9], ErrFrameTooLarge, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			raw := &chunkConn{chunks: slices0(tt.chunks), err: io.EOF}
			c, err := newGuardConn(raw)
			if err != nil {
				t.Fatal(err)
			}
			var got []byte
			for i := 0; ; i++ {
				p := make([]byte, tt.sizes[i%len(tt.sizes)])
				n, err := c.Read(p)
				got = append(got, p[:n]...)
				if err != nil {
					if !errors.Is(err, tt.wantErr) {
						t.Fatalf("error %v, want %v", err, tt.wantErr)
					}
					break
				}
				if i > 1<<16 {
					t.Fatal("no end")
				}
			}
			if tt.prefix && bytes.HasPrefix(tt.want, got) && len(got) >= greetingBytes {
				return
			}
			if !bytes.Equal(got, tt.want) {
				t.Fatalf("passed on %d bytes, want %d (equal prefix: %v)", len(got), len(tt.want), bytes.HasPrefix(tt.want, got))
			}
		})
	}
	t.Run("one read of the connection per buffered message", func(t *testing.T) {
		raw := &chunkConn{chunks: [][]byte{slices(greeting(), readyCmd("PUB")), slices(msg, msg, msg, msg)}, err: io.EOF}
		c, err := newGuardConn(raw)
		if err != nil {
			t.Fatal(err)
		}
		p := make([]byte, 300)
		for _, n := range []int{greetingBytes, len(readyCmd("PUB"))} {
			if _, err := io.ReadFull(c, p[:n]); err != nil {
				t.Fatal(err)
			}
		}
		before := raw.reads
		for range 4 { // as zmq4 reads: each frame's header, then its body
			for _, n := range []int{2, 9, 2, 8, 9, 300} {
				if _, err := io.ReadFull(c, p[:n]); err != nil {
					t.Fatal(err)
				}
			}
		}
		if got := raw.reads - before; got != 1 {
			t.Fatalf("%d reads of the connection for four messages, want 1", got)
		}
	})
}

// slices0 copies chunks, which chunkConn consumes.
func slices0(chunks [][]byte) [][]byte {
	out := make([][]byte, len(chunks))
	for i, c := range chunks {
		out[i] = append([]byte(nil), c...)
	}
	return out
}

// recConn records every write it is given.
type recConn struct {
	net.Conn
	writes [][]byte
}

func (c *recConn) Write(p []byte) (int, error) {
	c.writes = append(c.writes, append([]byte(nil), p...))
	return len(p), nil
}
func (c *recConn) SetDeadline(time.Time) error      { return nil }
func (c *recConn) SetWriteDeadline(time.Time) error { return nil }
func (c *recConn) Close() error                     { return nil }

// split cuts a message into the writes zmq4's Send makes: each frame's
// header, then its body.
func split(frames ...[]byte) [][]byte {
	var out [][]byte
	for _, f := range frames {
		h := 2
		if f[0]&flagLong != 0 {
			h = 9
		}
		out = append(out, f[:h])
		if len(f) > h {
			out = append(out, f[h:])
		}
	}
	return out
}

// Test_GuardConnGathersMessages: the pieces zmq4 writes a message in reach
// the connection as one write, byte for byte, and nothing is held back
// past the end of a message, the greeting or a command, so no peer waits
// on bytes still gathered here. A message larger than the buffer goes out
// in several writes; framing the guard cannot follow passes through.
func Test_GuardConnGathersMessages(t *testing.T) {
	event := [][]byte{frame(flagMore, []byte("kv-events")), frame(flagMore, make([]byte, 8)), frame(0, bytes.Repeat([]byte{7}, 300))}
	big := frame(0, bytes.Repeat([]byte{1}, 3*writeBufBytes/2))
	for _, tt := range []struct {
		name   string
		pieces [][]byte
		writes []int // bytes of each write the connection sees
	}{
		{"greeting, then READY", [][]byte{greeting(), readyCmd("PUB")}, []int{greetingBytes, len(readyCmd("PUB"))}},
		{"a three-frame message", split(event...), []int{len(slices(event...))}},
		{"two messages", append(split(event...), split(event...)...), []int{len(slices(event...)), len(slices(event...))}},
		{"an empty last frame", split(frame(flagMore, []byte("t")), frame(0, nil)), []int{5}},
		{"one write for the whole message is passed on as is", [][]byte{slices(event...)}, []int{len(slices(event...))}},
		{"a frame larger than the buffer", split(frame(flagMore, []byte("t")), big), []int{3 + 9, len(big) - 9}},
		{"not ZMTP framing", [][]byte{{0xf0, 1, 2}, {3}}, []int{3, 1}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			raw := &recConn{}
			c := &guardConn{Conn: raw, out: zmtpGuard{greeting: greetingBytes}}
			if tt.name != "greeting, then READY" {
				c.out.greeting = 0 // start after the handshake
			}
			for _, p := range tt.pieces {
				if n, err := c.Write(p); err != nil || n != len(p) {
					t.Fatalf("Write(%d bytes) = %d, %v", len(p), n, err)
				}
			}
			var sizes []int
			for _, w := range raw.writes {
				sizes = append(sizes, len(w))
			}
			if !equalInts(sizes, tt.writes) {
				t.Fatalf("writes of %v bytes, want %v", sizes, tt.writes)
			}
			if got, want := slices(raw.writes...), slices(tt.pieces...); !bytes.Equal(got, want) {
				t.Fatalf("the connection got %d bytes differing from the %d written", len(got), len(want))
			}
		})
	}
}

func equalInts(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
