package cluster

import (
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
)

// tcpStream is raft's stream layer over a listener we own. Owning it lets a
// caller bind the Raft port before it knows the whole cluster (tests bind
// three ports, then build --initial-cluster from them) and lets the
// advertised address differ from the bound one.
//
// It also keeps the connections it accepted, so drain can wait out raft's
// handlers of them before the node closes its stores.
type tcpStream struct {
	net.Listener
	advertise net.Addr

	mu      sync.Mutex
	drained bool
	conns   map[*servedConn]struct{}
	serving sync.WaitGroup // one per accepted connection not yet closed
}

// Accept hands raft an inbound connection it will serve until it closes
// it (NetworkTransport's handleConn closes it on the way out).
func (s *tcpStream) Accept() (net.Conn, error) {
	c, err := s.Listener.Accept()
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.drained {
		c.Close()
		return nil, net.ErrClosed
	}
	if s.conns == nil {
		s.conns = map[*servedConn]struct{}{}
	}
	sc := &servedConn{Conn: c, s: s}
	s.conns[sc] = struct{}{}
	s.serving.Add(1)
	return sc, nil
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
// its next read; a heartbeat it is answering finishes first.
func (s *tcpStream) drain() {
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

func (s *tcpStream) Dial(address raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	return net.DialTimeout("tcp", string(address), timeout)
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

// newTransport builds the Raft transport on cfg.RaftListener, or on a new
// listener bound to cfg.RaftBind.
func newTransport(cfg Config, provider *dialProvider, logger hclog.Logger) (*raft.NetworkTransport, *tcpStream, error) {
	ln := cfg.RaftListener
	if ln == nil {
		var err error
		if ln, err = net.Listen("tcp", cfg.RaftBind); err != nil {
			return nil, nil, fmt.Errorf("raft transport on %s: %w", cfg.RaftBind, err)
		}
	}
	stream := &tcpStream{Listener: ln}
	if cfg.RaftAdvertise != "" {
		stream.advertise = advertiseAddr(cfg.RaftAdvertise)
	}
	if err := CheckAdvertise(stream.Addr().String()); err != nil {
		ln.Close()
		return nil, nil, fmt.Errorf("raft address: %w (set --raft-advertise)", err)
	}
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
