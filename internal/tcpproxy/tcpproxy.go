package tcpproxy

import (
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
)

// Proxy forwards every connection it accepts to its target.
type Proxy struct {
	ln     net.Listener
	target atomic.Pointer[string]
	conns  atomic.Int64
	wg     sync.WaitGroup

	mu   sync.Mutex
	cut  bool
	open []net.Conn
}

// Start listens on a free loopback port and forwards to target (which
// SetTarget may name later, before the first connection). Cleanup closes
// the proxy.
func Start(t testing.TB, target string) *Proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &Proxy{ln: ln}
	p.SetTarget(target)
	p.wg.Add(1)
	go p.serve()
	t.Cleanup(p.Close)
	return p
}

// Addr is where to dial the proxy.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// SetTarget names where new connections go.
func (p *Proxy) SetTarget(target string) { p.target.Store(&target) }

// Conns counts the connections accepted so far.
func (p *Proxy) Conns() int64 { return p.conns.Load() }

// Cut closes every connection and refuses new ones until Heal.
func (p *Proxy) Cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = true
	p.closeOpen()
}

// Heal lets connections through again.
func (p *Proxy) Heal() {
	p.mu.Lock()
	p.cut = false
	p.mu.Unlock()
}

// Close stops the proxy and cuts every connection: raft's transport keeps
// pooled connections open past its own Close, so they would never end.
func (p *Proxy) Close() {
	p.ln.Close()
	p.mu.Lock()
	p.closeOpen()
	p.mu.Unlock()
	p.wg.Wait()
}

func (p *Proxy) closeOpen() {
	for _, c := range p.open {
		c.Close()
	}
	p.open = nil
}

func (p *Proxy) serve() {
	defer p.wg.Done()
	for {
		in, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.conns.Add(1)
		out, err := net.Dial("tcp", *p.target.Load())
		if err != nil {
			in.Close()
			continue
		}
		p.mu.Lock()
		if p.cut {
			p.mu.Unlock()
			in.Close()
			out.Close()
			continue
		}
		p.open = append(p.open, in, out)
		p.mu.Unlock()
		p.wg.Add(2)
		for _, pair := range [][2]net.Conn{{in, out}, {out, in}} {
			go func() {
				defer p.wg.Done()
				_, _ = io.Copy(pair[0], pair[1])
				pair[0].Close()
				pair[1].Close()
			}()
		}
	}
}
