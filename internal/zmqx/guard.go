package zmqx

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-zeromq/zmq4"
	"github.com/go-zeromq/zmq4/transport"
)

// Limits of what one peer may send on a guarded connection.
const (
	// MaxFrameBytes is the largest frame accepted (SPEC §11: drop > 64 MiB).
	MaxFrameBytes = 64 << 20
	// MaxMessageFrames bounds the frames of one multipart message; KV
	// event messages have 3 and replay replies 4 or 5.
	MaxMessageFrames = 16
	// HandshakeTimeout bounds the ZMTP greeting and handshake, so a peer
	// that accepts TCP but never speaks ZMTP cannot hang a dial.
	HandshakeTimeout = 5 * time.Second
)

var (
	// ErrFrameTooLarge: the peer announced a frame or message past the
	// limits; the connection is closed before anything is allocated.
	ErrFrameTooLarge = errors.New("zmq frame too large")
	// ErrBadFraming: the peer's byte stream is not ZMTP 3 framing.
	ErrBadFraming = errors.New("invalid zmtp framing")
	// ErrEndpoint: an endpoint kvselect cannot dial.
	ErrEndpoint = errors.New("invalid zmq endpoint")
)

// Guarded transport names: the scheme a guarded endpoint is dialed with.
const (
	schemeTCP = "kvselect+tcp"
	schemeIPC = "kvselect+ipc"
)

var registerOnce sync.Once

func register() {
	registerOnce.Do(func() {
		for name, network := range map[string]string{schemeTCP: "tcp", schemeIPC: "unix"} {
			if err := zmq4.RegisterTransport(name, guarded{transport.New(network)}); err != nil {
				panic(fmt.Sprintf("zmqx: register %s: %v", name, err))
			}
		}
	})
}

// Guarded rewrites a tcp:// or ipc:// endpoint so that a zmq4 socket dials
// it through the guarded transport. Other schemes are refused: kvselect
// only talks to other processes.
func Guarded(endpoint string) (string, error) {
	register()
	scheme, rest, ok := strings.Cut(endpoint, "://")
	if !ok || rest == "" {
		return "", fmt.Errorf("%w: %q", ErrEndpoint, endpoint)
	}
	switch scheme {
	case "tcp":
		return schemeTCP + "://" + rest, nil
	case "ipc":
		return schemeIPC + "://" + rest, nil
	}
	return "", fmt.Errorf("%w: unsupported scheme %q in %q", ErrEndpoint, scheme, endpoint)
}

// RankEndpoint returns the endpoint of dp rank r for a per-worker base
// endpoint, with vLLM's convention (offset_endpoint_port): a TCP port is
// offset by the rank; an IPC path gets the suffix "_dp<rank>". Rank 0 is
// the base itself.
func RankEndpoint(base string, rank uint32) (string, error) {
	if rank == 0 {
		return base, nil
	}
	scheme, rest, ok := strings.Cut(base, "://")
	if !ok {
		return "", fmt.Errorf("%w: %q", ErrEndpoint, base)
	}
	switch scheme {
	case "tcp":
		host, port, err := net.SplitHostPort(rest)
		if err != nil {
			return "", fmt.Errorf("%w: %q: %w", ErrEndpoint, base, err)
		}
		p, err := strconv.ParseUint(port, 10, 16)
		if err != nil || p+uint64(rank) > 65535 {
			return "", fmt.Errorf("%w: port of %q cannot be offset by rank %d", ErrEndpoint, base, rank)
		}
		return "tcp://" + net.JoinHostPort(host, strconv.FormatUint(p+uint64(rank), 10)), nil
	case "ipc", "inproc":
		return fmt.Sprintf("%s_dp%d", base, rank), nil
	}
	return "", fmt.Errorf("%w: unsupported scheme %q in %q", ErrEndpoint, scheme, base)
}

// WriteTimeout bounds one write on a guarded connection. A peer that stops
// reading (paused, or its receive buffer full) is cut off after it, so
// that a PUB socket, which writes to its subscribers one after another,
// never stalls for the others behind it.
const WriteTimeout = 2 * time.Second

// ErrStalled: a write did not complete within WriteTimeout, or writes kept
// the writer waiting most of the time (see slowWindow); the connection was
// closed.
var ErrStalled = errors.New("zmq peer stopped reading")

// A peer that reads, but slower than it is written to, never trips
// WriteTimeout while it holds up a PUB socket's writer most of the time.
// So a connection whose writes block for more than slowShare of a
// slowWindow is cut as well.
var (
	slowWindow = 5 * time.Second // a variable for tests
	slowShare  = 0.8
)

// guarded wraps a net transport so every connection it dials or accepts is
// checked by a zmtpGuard and has its writes bounded.
type guarded struct{ transport.Transport }

func (g guarded) Dial(ctx context.Context, d transport.Dialer, addr string) (net.Conn, error) {
	c, err := g.Transport.Dial(ctx, d, addr)
	if err != nil {
		return nil, err
	}
	return newGuardConn(c)
}

func (g guarded) Listen(ctx context.Context, addr string) (net.Listener, error) {
	ln, err := g.Transport.Listen(ctx, addr)
	if err != nil {
		return nil, err
	}
	return guardListener{ln}, nil
}

// guardListener guards every connection it accepts, as Dial does.
type guardListener struct{ net.Listener }

func (l guardListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return newGuardConn(c)
}

func newGuardConn(c net.Conn) (*guardConn, error) {
	if err := c.SetDeadline(time.Now().Add(HandshakeTimeout)); err != nil {
		c.Close()
		return nil, err
	}
	return &guardConn{Conn: c, g: zmtpGuard{greeting: greetingBytes}, out: zmtpGuard{greeting: greetingBytes}}, nil
}

// guardConn checks the peer's bytes as zmq4 reads them. On a violation
// it closes the connection and reports the error to zmq4, which surfaces
// it from Recv. Writes are bounded by WriteTimeout.
type guardConn struct {
	net.Conn
	mu  sync.Mutex
	g   zmtpGuard
	err error

	// Writes, by one writer at a time (zmq4's): the window in which
	// blocked sums the time spent in Write.
	window  time.Time
	blocked time.Duration

	// Reads go through rbuf: zmq4 reads every frame's header and body
	// separately, which unbuffered is a syscall each (six per KV event
	// message). rbuf[rpos:rend] is read from the connection and not yet
	// passed on; rerr is the error that came with it, held until then.
	rbuf       []byte
	rpos, rend int
	rerr       error

	// Writes are gathered into wbuf until a message is complete: zmq4
	// writes every frame's header and body apart (six writes for a
	// three-frame message), and buffers written by SendMulti reach a
	// wrapped connection one by one too. out follows the framing of what
	// is written, to tell where a message (or the greeting) ends; a
	// writer whose framing it cannot follow gets unbuffered writes.
	out     zmtpGuard
	wbuf    []byte
	wdirect bool
}

// readBufBytes sizes a connection's read buffer, allocated on its first
// read: one syscall brings in up to this many bytes of frames.
const readBufBytes = 32 << 10

// writeBufBytes bounds the bytes gathered before a write: a message
// larger than this goes out in several.
const writeBufBytes = 64 << 10

// Write gathers p until the message it belongs to is complete, then
// writes the message at once (writeNow). An error of that write is the
// error of the Write that completed the message. Every such error leaves
// the connection unusable (writeNow closes it on a stall; any other is
// the connection's own), so the bytes reported written before do not
// matter.
func (c *guardConn) Write(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil // zmq4 writes an empty frame's body too
	}
	if c.wdirect {
		return c.writeNow(p)
	}
	if err := c.out.feed(p); err != nil {
		// Not framing this guard can follow: stop gathering.
		c.wdirect = true
		if err := c.flush(); err != nil {
			return 0, err
		}
		return c.writeNow(p)
	}
	done := c.out.atBoundary()
	if done && len(c.wbuf) == 0 {
		return c.writeNow(p) // a whole message in one write: no copy
	}
	if len(c.wbuf)+len(p) > writeBufBytes {
		if err := c.flush(); err != nil {
			return 0, err
		}
		if len(p) >= writeBufBytes {
			return c.writeNow(p)
		}
	}
	c.wbuf = append(c.wbuf, p...)
	if done {
		if err := c.flush(); err != nil {
			return 0, err
		}
	}
	return len(p), nil
}

// flush writes what Write gathered.
func (c *guardConn) flush() error {
	if len(c.wbuf) == 0 {
		return nil
	}
	_, err := c.writeNow(c.wbuf)
	c.wbuf = c.wbuf[:0]
	return err
}

// writeNow writes within WriteTimeout, or closes the connection and fails
// with ErrStalled. The error is deliberately not a net.Error timeout:
// zmq4 keeps a connection whose write timed out, though a frame may be
// half written. ErrStalled is not one zmq4 acts on either; what ends the
// connection is the close here, on which its next read or write fails.
func (c *guardConn) writeNow(p []byte) (int, error) {
	start := time.Now()
	if err := c.Conn.SetWriteDeadline(start.Add(WriteTimeout)); err != nil {
		return 0, err
	}
	n, err := c.Conn.Write(p)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		c.Conn.Close()
		return n, fmt.Errorf("%w: no write progress in %v", ErrStalled, WriteTimeout)
	}
	if start.Sub(c.window) > slowWindow {
		c.window, c.blocked = start, 0
	}
	if c.blocked += time.Since(start); c.blocked > time.Duration(slowShare*float64(slowWindow)) {
		c.Conn.Close()
		return n, fmt.Errorf("%w: writes waited %v of the last %v", ErrStalled, c.blocked.Round(time.Millisecond), slowWindow)
	}
	return n, err
}

func (c *guardConn) Read(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err != nil {
		return 0, c.err
	}
	n, err := c.fill(p)
	if n > 0 {
		handshook := c.g.handshook
		if gerr := c.g.feed(p[:n]); gerr != nil {
			c.err = gerr
			c.Conn.Close()
			return 0, gerr
		}
		if !handshook && c.g.handshook {
			// The peer's READY arrived: the handshake deadline is over.
			if derr := c.Conn.SetDeadline(time.Time{}); derr != nil && err == nil {
				err = derr
			}
		}
	}
	return n, err
}

// fill reads into p from the buffer, refilling it with one read of the
// connection when it is empty; a read as large as the buffer bypasses it.
// The guard sees exactly the bytes passed on, as it would unbuffered.
func (c *guardConn) fill(p []byte) (int, error) {
	if c.rpos == c.rend {
		if err := c.rerr; err != nil {
			c.rerr = nil
			return 0, err
		}
		if len(p) >= readBufBytes {
			return c.Conn.Read(p)
		}
		if c.rbuf == nil {
			c.rbuf = make([]byte, readBufBytes)
		}
		n, err := c.Conn.Read(c.rbuf)
		c.rpos, c.rend = 0, n
		if n == 0 {
			return 0, err
		}
		c.rerr = err
	}
	n := copy(p, c.rbuf[c.rpos:c.rend])
	c.rpos += n
	return n, nil
}

// ZMTP 3 framing (rfc.zeromq.org/spec/23): a 64-byte greeting, then
// frames of a flags byte (bit 0 MORE, bit 1 LONG, bit 2 COMMAND, the rest
// zero), a 1-byte or 8-byte big-endian size, and the body.
const (
	greetingBytes = 64
	flagMore      = 0x01
	flagLong      = 0x02
	flagCommand   = 0x04
)

// zmtpGuard follows the framing of a byte stream incrementally, however
// the reads split it, and fails as soon as a header announces more than
// the limits allow — before the reader allocates for it.
type zmtpGuard struct {
	greeting  int     // greeting bytes still to pass
	hdr       [9]byte // header being assembled
	hdrN      int
	body      uint64 // body bytes still to pass
	command   bool   // the current frame is a command
	msgFrames int    // frames of the current message so far
	msgBytes  uint64 // body bytes of the current message so far
	handshook bool   // a complete command (READY) has been seen
}

// atBoundary reports whether the bytes fed so far end a message, a
// command or the greeting.
func (g *zmtpGuard) atBoundary() bool {
	return g.greeting == 0 && g.hdrN == 0 && g.body == 0 && g.msgFrames == 0
}

func (g *zmtpGuard) feed(b []byte) error {
	for len(b) > 0 {
		switch {
		case g.greeting > 0:
			k := min(g.greeting, len(b))
			g.greeting -= k
			b = b[k:]
		case g.body > 0:
			k := min(g.body, uint64(len(b)))
			g.body -= k
			b = b[k:]
			if g.body == 0 && g.command {
				g.handshook = true
			}
		default:
			g.hdr[g.hdrN] = b[0]
			g.hdrN++
			b = b[1:]
			if err := g.header(); err != nil {
				return err
			}
		}
	}
	return nil
}

// header completes a frame header once all its bytes are in.
func (g *zmtpGuard) header() error {
	flags := g.hdr[0]
	if flags&^(flagMore|flagLong|flagCommand) != 0 {
		return fmt.Errorf("%w: flags %#x", ErrBadFraming, flags)
	}
	want := 2
	if flags&flagLong != 0 {
		want = 9
	}
	if g.hdrN < want {
		return nil
	}
	g.hdrN = 0
	var size uint64
	for _, c := range g.hdr[1:want] {
		size = size<<8 | uint64(c)
	}
	if size > MaxFrameBytes {
		return fmt.Errorf("%w: frame of %d bytes (limit %d)", ErrFrameTooLarge, size, MaxFrameBytes)
	}
	g.command = flags&flagCommand != 0
	if !g.command {
		g.msgFrames++
		g.msgBytes += size
		if g.msgFrames > MaxMessageFrames || g.msgBytes > 2*MaxFrameBytes {
			return fmt.Errorf("%w: message of %d frames, %d bytes", ErrFrameTooLarge, g.msgFrames, g.msgBytes)
		}
		if flags&flagMore == 0 {
			g.msgFrames, g.msgBytes = 0, 0
		}
	}
	g.body = size
	if size == 0 && g.command {
		g.handshook = true
	}
	return nil
}
