package cluster

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"

	"github.com/kvselect/kvselect/internal/authtoken"
)

// tcpStream is raft's stream layer over a listener we own. Owning it lets a
// caller bind the Raft port before it knows the whole cluster (tests bind
// three ports, then build --initial-cluster from them) and lets the
// advertised address differ from the bound one.
//
// While the node holds an admin token, every connection is authenticated
// (raftauth.go) before raft gets it: inbound ones by a goroutine of their
// own (admit), so that a peer that connects and says nothing holds up
// neither raft's accept loop nor anyone else, outbound ones in Dial.
//
// It also keeps the connections it accepted, so drain can wait out raft's
// handlers of them before the node closes its stores.
type tcpStream struct {
	net.Listener
	advertise net.Addr
	// auth is read for every connection: while it holds no token,
	// connections are raft's at once, as before Raft authentication.
	auth *authtoken.Holder
	// signFor is the address the peer dialled at addr advertises (a
	// --peer-dial override is a proxy's address); nil: addr itself.
	signFor          func(addr string) string
	handshakeTimeout time.Duration
	refusals         *refusals

	ready  chan net.Conn  // admitted inbound connections, for Accept
	slots  chan struct{}  // one per inbound connection being admitted
	done   chan struct{}  // closed by Close
	admits sync.WaitGroup // acceptLoop and every admit

	mu      sync.Mutex
	closed  bool
	pending map[net.Conn]struct{} // inbound connections in their handshake
	drained bool
	conns   map[*servedConn]struct{}
	serving sync.WaitGroup // one per accepted connection not yet closed
}

// streamConfig is what newTCPStream needs besides the listener.
type streamConfig struct {
	advertise        string // "": the listener's address
	auth             *authtoken.Holder
	signFor          func(addr string) string
	handshakeTimeout time.Duration // 0: handshakeTimeout
	maxHandshakes    int           // 0: maxHandshakes
	log              *slog.Logger
}

// newTCPStream serves ln and starts accepting on it; Close stops that.
func newTCPStream(ln net.Listener, c streamConfig) *tcpStream {
	s := &tcpStream{Listener: ln, auth: c.auth, signFor: c.signFor,
		handshakeTimeout: cmp.Or(c.handshakeTimeout, handshakeTimeout),
		refusals:         newRefusals(cmp.Or(c.log, slog.New(slog.DiscardHandler))),
		ready:            make(chan net.Conn), slots: make(chan struct{}, cmp.Or(c.maxHandshakes, maxHandshakes)),
		done: make(chan struct{}), pending: map[net.Conn]struct{}{}, conns: map[*servedConn]struct{}{}}
	if c.advertise != "" {
		s.advertise = advertiseAddr(c.advertise)
	}
	s.admits.Add(1)
	go s.acceptLoop()
	return s
}

// acceptLoop takes connections off the listener until it closes and admits
// each in a goroutine of its own, up to the bound on handshakes in
// progress; past it a connection is closed at once.
func (s *tcpStream) acceptLoop() {
	defer s.admits.Done()
	var backoff time.Duration
	for {
		c, err := s.Listener.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			// EMFILE and the like: wait, as raft's own accept loop does.
			backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
			select {
			case <-s.done:
				return
			case <-time.After(backoff):
			}
			continue
		}
		backoff = 0
		select {
		case s.slots <- struct{}{}:
		default:
			// Counted before the close, so that whoever sees the
			// connection end sees it counted.
			s.refusals.record("inbound", c.RemoteAddr().String(),
				refuse(reasonBusy, "%d connections are being admitted already", cap(s.slots)))
			c.Close()
			continue
		}
		s.admits.Add(1)
		go s.admit(c)
	}
}

// admit authenticates an inbound connection while the node holds a token
// and hands it to Accept.
func (s *tcpStream) admit(c net.Conn) {
	defer s.admits.Done()
	defer func() { <-s.slots }()
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		c.Close()
		return
	}
	s.pending[c] = struct{}{} // Close cuts the handshake
	s.mu.Unlock()
	conn, err := net.Conn(c), error(nil)
	if sec := s.auth.Load(); sec.Token != "" {
		var token string
		if token, err = acceptHandshake(c, sec, s.Addr().String(), time.Now().Add(s.handshakeTimeout)); err == nil {
			conn = &authedConn{Conn: c, token: token, auth: s.auth, dropped: io.EOF, log: s.refusals.log}
		}
	}
	s.mu.Lock()
	delete(s.pending, c)
	s.mu.Unlock()
	if err != nil {
		c.Close()
		s.refusals.record("inbound", c.RemoteAddr().String(), err)
		return
	}
	select {
	case s.ready <- conn:
	case <-s.done:
		c.Close()
	}
}

// Accept hands raft an inbound connection, authenticated when the node
// holds a token, that raft will serve until it closes it
// (NetworkTransport's handleConn closes it on the way out).
func (s *tcpStream) Accept() (net.Conn, error) {
	var c net.Conn
	select {
	case c = <-s.ready:
	case <-s.done:
		return nil, net.ErrClosed
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.drained {
		c.Close()
		return nil, net.ErrClosed
	}
	sc := &servedConn{Conn: c, s: s}
	s.conns[sc] = struct{}{}
	s.serving.Add(1)
	return sc, nil
}

// Close stops accepting: it closes the listener and cuts the handshakes in
// progress. raft's NetworkTransport.Close calls it.
func (s *tcpStream) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	close(s.done)
	for c := range s.pending {
		c.Close()
	}
	return s.Listener.Close()
}

// drain cuts every accepted connection and waits until raft's handlers of
// them have returned; call it after the transport is closed (no new
// connection is served) and before the stores close. hashicorp/raft
// (v1.7.3) answers heartbeats on the connection's goroutine, beside its
// main loop, and neither Raft.Shutdown nor NetworkTransport.Close waits
// for those goroutines: a heartbeat that passed raft's shutdown check as
// the node stopped went on to save the current term in a store already
// closed, and raft panics on that ("failed to save current term: database
// not open", seen once under load). A cut connection ends its handler at
// its next read; a heartbeat it is answering finishes first. drain also
// waits for the stream's own goroutines (acceptLoop, admit).
func (s *tcpStream) drain() {
	s.Close()
	s.admits.Wait()
	s.mu.Lock()
	s.drained = true
	for c := range s.conns {
		c.Conn.Close() // the raw connection: the handler's own Close marks it done
	}
	s.mu.Unlock()
	s.serving.Wait()
}

// servedConn is an accepted connection; its first Close tells the stream
// the handler is done with it.
type servedConn struct {
	net.Conn
	s    *tcpStream
	once sync.Once
}

func (c *servedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() {
		c.s.mu.Lock()
		delete(c.s.conns, c)
		c.s.mu.Unlock()
		c.s.serving.Done()
	})
	return err
}

func (s *tcpStream) Addr() net.Addr {
	if s.advertise != nil {
		return s.advertise
	}
	return s.Listener.Addr()
}

// Dial connects to a peer's Raft port and, while the node holds a token,
// authenticates the connection both ways before raft sends a byte.
func (s *tcpStream) Dial(address raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	conn, err := net.DialTimeout("tcp", string(address), timeout)
	if err != nil {
		return nil, err
	}
	target := string(address)
	if s.signFor != nil {
		target = s.signFor(target)
	}
	return s.authenticateAs(conn, string(address), target, timeout)
}

// authenticateAs runs the dialer's side of the handshake on conn, dialled
// at addr to reach the peer that advertises target, within timeout (at
// most handshakeTimeout), and returns conn, or closes it and fails.
// Without a token it returns conn as it is.
func (s *tcpStream) authenticateAs(conn net.Conn, addr, target string, timeout time.Duration) (net.Conn, error) {
	sec := s.auth.Load()
	if sec.Token == "" {
		return conn, nil
	}
	limit := s.handshakeTimeout
	if timeout > 0 {
		limit = min(limit, timeout)
	}
	token, err := dialHandshake(conn, sec, target, time.Now().Add(limit))
	if err != nil {
		conn.Close()
		s.refusals.record("outbound", addr, err)
		return nil, fmt.Errorf("raft handshake with %s: %w", addr, err)
	}
	return &authedConn{Conn: conn, token: token, auth: s.auth, dropped: errTokenDropped, log: s.refusals.log}, nil
}

// advertiseAddr is an advertised address kept as written: a DNS name
// (a StatefulSet pod's stable name) stays a name, resolved by whoever dials
// it, so the Raft configuration matches --initial-cluster exactly.
type advertiseAddr string

func (a advertiseAddr) Network() string { return "tcp" }
func (a advertiseAddr) String() string  { return string(a) }

// dialProvider implements raft.ServerAddressProvider for --peer-dial: Raft
// RPCs to a listed peer go to the override (a fault-injection proxy)
// instead of the advertised address. Peers not listed resolve to their
// address in the latest configuration, so the override never changes what
// is replicated.
type dialProvider struct {
	overrides map[string]PeerDial
	raft      atomic.Pointer[raft.Raft]
}

func (p *dialProvider) ServerAddr(id raft.ServerID) (raft.ServerAddress, error) {
	if d, ok := p.overrides[string(id)]; ok && d.Raft != "" {
		return raft.ServerAddress(d.Raft), nil
	}
	return p.configured(id)
}

// configured is server id's address in the latest configuration.
func (p *dialProvider) configured(id raft.ServerID) (raft.ServerAddress, error) {
	if r := p.raft.Load(); r != nil {
		if f := r.GetConfiguration(); f.Error() == nil {
			for _, s := range f.Configuration().Servers {
				if s.ID == id {
					return s.Address, nil
				}
			}
		}
	}
	return "", fmt.Errorf("no address known for server %q", id)
}

// advertised is the address the peer dialled at addr advertises, which a
// Raft handshake names: addr itself, or for a --peer-dial override (a
// proxy) the overridden peer's address in the configuration.
func (p *dialProvider) advertised(addr string) string {
	for id, d := range p.overrides {
		if d.Raft == addr {
			if a, err := p.configured(raft.ServerID(id)); err == nil {
				return string(a)
			}
		}
	}
	return addr
}

// newTransport builds the Raft transport on cfg.RaftListener, or on a new
// listener bound to cfg.RaftBind.
// log is the node's logger, for refused connections.
func newTransport(cfg Config, provider *dialProvider, logger hclog.Logger, log *slog.Logger) (*raft.NetworkTransport, *tcpStream, error) {
	ln := cfg.RaftListener
	if ln == nil {
		var err error
		if ln, err = net.Listen("tcp", cfg.RaftBind); err != nil {
			return nil, nil, fmt.Errorf("raft transport on %s: %w", cfg.RaftBind, err)
		}
	}
	addr := cmp.Or(cfg.RaftAdvertise, ln.Addr().String())
	if err := CheckAdvertise(addr); err != nil {
		ln.Close()
		return nil, nil, fmt.Errorf("raft address: %w (set --raft-advertise)", err)
	}
	stream := newTCPStream(ln, streamConfig{advertise: cfg.RaftAdvertise, auth: cfg.Auth, signFor: provider.advertised, log: log})
	// MaxRPCsInFlight 1 turns off hashicorp/raft's pipelined replication.
	// Its netPipeline can deadlock when a follower answers Success=false:
	// the decoder stops reading while one more send waits on the in-flight
	// channel, so replication to that follower stops for good (heartbeats
	// go on, so no election heals it) and Shutdown waits forever on the
	// stuck goroutine. We saw the shutdown hang in about 1 in 10 runs of a
	// CLI test that stops three in-process nodes at once; grafana/pyroscope
	// #5518 analyses the replication stall. The catalog's write rate is far
	// below what synchronous AppendEntries (one RPC in flight per
	// follower) carries, and hashicorp's own notes (#541) find little gain
	// from pipelining at low latency.
	tc := &raft.NetworkTransportConfig{Stream: stream, MaxPool: 3, Timeout: 10 * time.Second, Logger: logger,
		MaxRPCsInFlight: 1}
	if len(cfg.PeerDial) > 0 {
		tc.ServerAddressProvider = provider
	}
	return raft.NewNetworkTransportWithConfig(tc), stream, nil
}
