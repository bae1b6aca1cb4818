package faultproxy

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kvselect/kvselect/internal/poll"
)

// echoServer answers each line with the same line until the client
// closes. Cleanup closes it and waits for its goroutines.
func echoServer(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	conns := map[net.Conn]bool{}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns[c] = true
			mu.Unlock()
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer c.Close()
				io.Copy(c, c)
			}()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	return ln.Addr().String()
}

func mustNewLink(t *testing.T, target string) *Link {
	t.Helper()
	l, err := NewLink("test", 0, 1, "raft", target)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

type lineConn struct {
	net.Conn
	r *bufio.Reader
}

func dialLink(t *testing.T, l *Link) *lineConn {
	t.Helper()
	c, err := net.DialTimeout("tcp", l.Addr(), 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return &lineConn{Conn: c, r: bufio.NewReader(c)}
}

// roundTrip sends a line and reads the echo within timeout.
func (c *lineConn) roundTrip(msg string, timeout time.Duration) (string, error) {
	c.SetDeadline(time.Now().Add(timeout))
	if _, err := io.WriteString(c, msg+"\n"); err != nil {
		return "", err
	}
	line, err := c.r.ReadString('\n')
	return strings.TrimSuffix(line, "\n"), err
}

func isTimeout(err error) bool { return errors.Is(err, os.ErrDeadlineExceeded) }

func Test_LinkPass(t *testing.T) {
	l := mustNewLink(t, echoServer(t))
	c := dialLink(t, l)
	for _, msg := range []string{"a", "hello", strings.Repeat("x", 100000)} {
		got, err := c.roundTrip(msg, 5*time.Second)
		if err != nil || got != msg {
			t.Fatalf("round trip of %d bytes: got %d bytes, err %v", len(msg), len(got), err)
		}
	}
	if n := l.Conns(); n != 1 {
		t.Fatalf("Conns = %d, want 1", n)
	}
}

func Test_LinkBlackhole(t *testing.T) {
	l := mustNewLink(t, echoServer(t))
	before := dialLink(t, l)
	if _, err := before.roundTrip("up", 5*time.Second); err != nil {
		t.Fatal(err)
	}

	l.SetFault(Fault{Blackhole: true})
	if _, err := before.roundTrip("cut", 5*time.Second); err == nil || isTimeout(err) {
		t.Fatalf("a connection open at the blackhole: err %v, want it cut", err)
	}
	during := dialLink(t, l) // accepted, held silent
	if _, err := during.roundTrip("lost", 300*time.Millisecond); !isTimeout(err) {
		t.Fatalf("a connection made during the blackhole: err %v, want a timeout", err)
	}

	l.Pass()
	if _, err := during.roundTrip("again", 5*time.Second); err == nil || isTimeout(err) {
		t.Fatalf("a held connection after healing: err %v, want it closed", err)
	}
	after := dialLink(t, l)
	if got, err := after.roundTrip("healed", 5*time.Second); err != nil || got != "healed" {
		t.Fatalf("after healing: %q, %v", got, err)
	}
}

func Test_LinkDelay(t *testing.T) {
	l := mustNewLink(t, echoServer(t))
	c := dialLink(t, l)
	const delay = 100 * time.Millisecond
	l.SetFault(Fault{Delay: delay, Jitter: 20 * time.Millisecond})
	start := time.Now()
	if got, err := c.roundTrip("slow", 5*time.Second); err != nil || got != "slow" {
		t.Fatalf("delayed round trip: %q, %v", got, err)
	}
	// The request and the answer are each delayed: a lower bound only.
	if took := time.Since(start); took < 2*delay {
		t.Fatalf("round trip took %v, want at least %v", took, 2*delay)
	}
	l.Pass()
	if got, err := c.roundTrip("fast", 5*time.Second); err != nil || got != "fast" {
		t.Fatalf("after healing: %q, %v", got, err)
	}
}

func Test_LinkDrop(t *testing.T) {
	l := mustNewLink(t, echoServer(t))
	c := dialLink(t, l)
	if _, err := c.roundTrip("up", 5*time.Second); err != nil {
		t.Fatal(err)
	}
	l.SetFault(Fault{DropProb: 1})
	if _, err := c.roundTrip("dropped", 5*time.Second); err == nil || isTimeout(err) {
		t.Fatalf("open connection on a link dropping everything: err %v, want it cut", err)
	}
	fresh := dialLink(t, l)
	if _, err := fresh.roundTrip("dropped", 5*time.Second); err == nil || isTimeout(err) {
		t.Fatalf("new connection on a link dropping everything: err %v, want it cut", err)
	}
	l.Pass()
	if got, err := dialLink(t, l).roundTrip("ok", 5*time.Second); err != nil || got != "ok" {
		t.Fatalf("after healing: %q, %v", got, err)
	}
}

func Test_LinkTargetDown(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	target := ln.Addr().String()
	ln.Close()
	l := mustNewLink(t, target)
	if _, err := dialLink(t, l).roundTrip("nobody", 5*time.Second); err == nil || isTimeout(err) {
		t.Fatalf("target down: err %v, want the connection closed", err)
	}
}

func Test_LinkCloseLeavesNothingRunning(t *testing.T) {
	target := echoServer(t)
	base := runtime.NumGoroutine()
	l, err := NewLink("test", 0, 1, "http", target)
	if err != nil {
		t.Fatal(err)
	}
	var clients []*lineConn
	for range 3 {
		c := dialLink(t, l)
		if _, err := c.roundTrip("up", 5*time.Second); err != nil {
			t.Fatal(err)
		}
		clients = append(clients, c)
	}
	// A chunk stuck in an hour's delay, then a connection held by a
	// blackhole: Close must end both.
	l.SetFault(Fault{Delay: time.Hour})
	io.WriteString(clients[0], "stuck\n")
	time.Sleep(50 * time.Millisecond) // let the chunk reach the delay (not a sync point: either way Close must end it)
	l.SetFault(Fault{Blackhole: true})
	dialLink(t, l)

	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if _, err := net.DialTimeout("tcp", l.Addr(), time.Second); err == nil {
		t.Fatal("the closed link still accepts")
	}
	// The echo server's goroutines for the proxied connections end once
	// the proxy closed its side; then only the test's own remain.
	poll.Eventually(t, 5*time.Second, "only the test's own goroutines remain", func() error {
		if n := runtime.NumGoroutine(); n > base {
			buf := make([]byte, 1<<20)
			return fmt.Errorf("%d goroutines, want at most %d:\n%s", n, base, buf[:runtime.Stack(buf, true)])
		}
		return nil
	})
}

// Test_LinkCutAndTarget: Cut resets connections at once, open and new,
// until Pass; a target named after Start is used by the next connection;
// Accepted counts every connection.
func Test_LinkCutAndTarget(t *testing.T) {
	l := Start(t, "")
	l.SetTarget(echoServer(t))
	c := dialLink(t, l)
	if got, err := c.roundTrip("up", 5*time.Second); err != nil || got != "up" {
		t.Fatalf("through a late target: %q, %v", got, err)
	}
	l.Cut()
	if _, err := c.roundTrip("cut", 5*time.Second); err == nil || isTimeout(err) {
		t.Fatalf("an open connection after Cut: err %v, want it reset", err)
	}
	if _, err := dialLink(t, l).roundTrip("cut", 5*time.Second); err == nil || isTimeout(err) {
		t.Fatalf("a new connection after Cut: err %v, want it reset", err)
	}
	l.Pass()
	if got, err := dialLink(t, l).roundTrip("healed", 5*time.Second); err != nil || got != "healed" {
		t.Fatalf("after Pass: %q, %v", got, err)
	}
	if n := l.Accepted(); n != 3 {
		t.Fatalf("Accepted = %d, want 3", n)
	}
}
