package faultproxy

import (
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Fault is what a Link does to the bytes it carries. The zero value
// passes everything through unchanged.
type Fault struct {
	// Blackhole forwards nothing in either direction: existing
	// connections are cut and new ones are accepted but held silent (the
	// dialer sees a connection that never answers, as behind a dead
	// switch), then closed when the blackhole lifts.
	Blackhole bool
	// Delay, plus a uniform random extra of up to Jitter, is waited
	// before each chunk is forwarded. Each direction of a connection is
	// one goroutine, so chunks keep their order.
	Delay, Jitter time.Duration
	// DropProb is the probability that a connection is cut when it is
	// accepted and before each chunk it forwards (a flaky link).
	DropProb float64
}

// Passes reports whether the fault leaves the link untouched.
func (f Fault) Passes() bool { return f == Fault{} }

// String describes the fault for logs and nemesis events.
func (f Fault) String() string {
	switch {
	case f.Passes():
		return "pass"
	case f.Blackhole:
		return "blackhole"
	}
	s := ""
	if f.Delay > 0 || f.Jitter > 0 {
		s = fmt.Sprintf("delay %v±%v", f.Delay, f.Jitter)
	}
	if f.DropProb > 0 {
		if s != "" {
			s += ", "
		}
		s += fmt.Sprintf("drop %.3g", f.DropProb)
	}
	return s
}

// Link is a TCP proxy for one directed link: connections one node dials
// to one port of another (for example n1's Raft RPCs to n2). It listens
// on a loopback port the kernel picks and forwards to its target. Its
// fault (and its target) can change at any time from any goroutine.
//
// Concurrency: mu guards fault, conns and held; target and accepted are
// atomic. The accept goroutine and two copy goroutines per connection
// belong to the Link; Close stops them all and waits for them.
type Link struct {
	Name string // e.g. "n1->n2/raft"
	From int    // index of the dialing node (-1: none, as in a test)
	To   int    // index of the node listened for (-1: not a node, e.g. a worker)
	Kind string // what the link carries: "raft", "http", "sync", "kv", …

	target   atomic.Pointer[string] // host:port forwarded to
	accepted atomic.Int64

	ln   net.Listener
	done chan struct{}
	wg   sync.WaitGroup

	mu     sync.Mutex
	fault  Fault
	conns  map[*linkConn]struct{} // forwarding connections
	held   map[net.Conn]struct{}  // accepted while blackholed
	closed bool
}

// linkConn is one proxied connection: the dialer's side and ours to the
// target. close is idempotent.
type linkConn struct {
	down, up net.Conn
	once     sync.Once
}

func (c *linkConn) close() {
	c.once.Do(func() {
		c.down.Close()
		c.up.Close()
	})
}

// NewLink starts a proxy to target on a new loopback port.
func NewLink(name string, from, to int, kind, target string) (*Link, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("link %s: %w", name, err)
	}
	l := &Link{Name: name, From: from, To: to, Kind: kind, ln: ln,
		done: make(chan struct{}), conns: map[*linkConn]struct{}{}, held: map[net.Conn]struct{}{}}
	l.SetTarget(target)
	l.wg.Add(1)
	go l.accept()
	return l, nil
}

// Start is NewLink for a test: a link to target (which SetTarget may name
// later, before the first connection) that the test's cleanup closes.
func Start(t testing.TB, target string) *Link {
	t.Helper()
	l, err := NewLink(t.Name(), -1, -1, "tcp", target)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

// Target is the host:port the link forwards new connections to.
func (l *Link) Target() string { return *l.target.Load() }

// SetTarget names where new connections go; open ones keep theirs.
func (l *Link) SetTarget(target string) { l.target.Store(&target) }

// Accepted counts the connections accepted so far, whatever became of
// them.
func (l *Link) Accepted() int64 { return l.accepted.Load() }

// Addr is the proxy's listening address (host:port), the one to dial.
func (l *Link) Addr() string { return l.ln.Addr().String() }

// Fault is the link's current fault.
func (l *Link) Fault() Fault {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.fault
}

// SetFault changes what the link does. Turning a blackhole on, or drops
// of every chunk, cuts every connection; turning a blackhole off closes
// the connections held meanwhile, so their dialers reconnect through a
// working link.
func (l *Link) SetFault(f Fault) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.fault = f
	if f.Blackhole || f.DropProb >= 1 {
		for c := range l.conns {
			c.close()
		}
		return
	}
	for c := range l.held {
		c.Close()
		delete(l.held, c)
	}
}

// Pass heals the link.
func (l *Link) Pass() { l.SetFault(Fault{}) }

// Cut closes every connection and every one accepted until Pass, as a
// node that went away would: dialers see a reset at once rather than the
// silence of a blackhole.
func (l *Link) Cut() { l.SetFault(Fault{DropProb: 1}) }

// Conns is the number of connections currently forwarded (held ones
// excluded).
func (l *Link) Conns() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.conns)
}

// Close stops the proxy: the listener, every connection and every
// goroutine, which it waits for.
func (l *Link) Close() error {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return nil
	}
	l.closed = true
	close(l.done)
	err := l.ln.Close()
	for c := range l.conns {
		c.close()
	}
	for c := range l.held {
		c.Close()
	}
	l.held = map[net.Conn]struct{}{}
	l.mu.Unlock()
	l.wg.Wait()
	return err
}

func (l *Link) accept() {
	defer l.wg.Done()
	for {
		down, err := l.ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			select {
			case <-l.done:
				return
			case <-time.After(10 * time.Millisecond): // e.g. EMFILE: do not spin
			}
			continue
		}
		l.accepted.Add(1)
		l.wg.Add(1)
		go l.serve(down)
	}
}

// serve dials the target for one accepted connection and forwards both
// ways, unless the link is blackholed (hold it) or flaky (maybe drop it).
func (l *Link) serve(down net.Conn) {
	defer l.wg.Done()
	l.mu.Lock()
	f, closed := l.fault, l.closed
	if !closed && f.Blackhole {
		l.held[down] = struct{}{}
	}
	l.mu.Unlock()
	switch {
	case closed:
		down.Close()
		return
	case f.Blackhole:
		return // held until the blackhole lifts or the link closes
	case drop(f.DropProb):
		down.Close()
		return
	}
	d := net.Dialer{Timeout: 5 * time.Second}
	up, err := d.Dial("tcp", l.Target())
	if err != nil {
		down.Close() // the target is down: the dialer sees a reset
		return
	}
	c := &linkConn{down: down, up: up}
	l.mu.Lock()
	if l.closed || l.fault.Blackhole {
		l.mu.Unlock()
		c.close()
		return
	}
	l.conns[c] = struct{}{}
	l.mu.Unlock()

	var pipes sync.WaitGroup
	pipes.Add(2)
	go func() { defer pipes.Done(); l.pipe(c, up, down) }()
	go func() { defer pipes.Done(); l.pipe(c, down, up) }()
	pipes.Wait()
	c.close()
	l.mu.Lock()
	delete(l.conns, c)
	l.mu.Unlock()
}

// pipe copies src to dst one chunk at a time, applying the fault current
// at each chunk. End of input half-closes dst, so request/response
// protocols finish; any error, a drop or a blackhole ends the connection
// in both directions.
func (l *Link) pipe(c *linkConn, dst, src net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			f := l.Fault()
			if f.Blackhole || drop(f.DropProb) {
				c.close()
				return
			}
			if wait := f.Delay + jitter(f.Jitter); wait > 0 {
				t := time.NewTimer(wait)
				select {
				case <-l.done:
					t.Stop()
					c.close()
					return
				case <-t.C:
				}
				if l.Fault().Blackhole {
					c.close()
					return
				}
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				c.close()
				return
			}
		}
		if err != nil {
			if tc, ok := dst.(*net.TCPConn); ok && err == io.EOF {
				tc.CloseWrite()
			} else {
				c.close()
			}
			return
		}
	}
}

func drop(p float64) bool { return p > 0 && rand.Float64() < p }

func jitter(j time.Duration) time.Duration {
	if j <= 0 {
		return 0
	}
	return rand.N(j + 1)
}
