package cluster

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kvselect/kvselect/internal/authtoken"
)

// Authentication of Raft connections (DESIGN.md, "Raft authentication").
// A node with an admin token authenticates every Raft connection, both
// ways, before raft reads or writes a byte of it:
//
//	acceptor → dialer:  magic, nonceA
//	dialer → acceptor:  magic, nonceD, len(addr) (2 bytes), addr, macD
//	acceptor → dialer:  verdict (1 byte: 1 accepted, 0 refused), macA if 1
//
// The verdict byte tells a refusal (the dialer's token or address is not
// the acceptor's) from a connection that merely ended (the acceptor is
// stopping): only the first is a refusal the dialer counts, so a peer's
// restart during a handshake is no authentication failure.
//
// magic is "kvsraft" and a version byte (1); the nonces are 32 random
// bytes; addr is the Raft address the dialer means to reach, as that peer
// advertises it. Each MAC is HMAC-SHA256 keyed by HMAC-SHA256(token,
// "kvselect raft v1") over the label, the prover's role ("dialer" or
// "acceptor"), both nonces and addr. Each side sends with its first token
// and accepts either of its tokens (a token file's two lines). The
// acceptor checks first and proves only to a dialer that proved itself.
const (
	raftAuthLabel = "kvselect raft v1"
	raftAuthMagic = "kvsraft\x01"
	nonceSize     = 32
	macSize       = sha256.Size
	// maxAddrLen bounds the address a dialer names: a DNS name (253
	// bytes) and a port fit with room to spare.
	maxAddrLen = 1024
	// handshakeTimeout bounds a whole handshake, on either side: a peer
	// that connects and sends nothing is cut after it.
	handshakeTimeout = 5 * time.Second
	// maxHandshakes bounds the inbound handshakes in progress (and the
	// authenticated connections waiting for raft to take them); past it a
	// new connection is closed at once and counted as busy.
	maxHandshakes = 64
	// refusalLogEvery is how often one kind of refusal is logged at WARN;
	// the others in between go to DEBUG and are counted in the next WARN.
	refusalLogEvery = time.Minute
)

const (
	roleDialer   = "dialer"
	roleAcceptor = "acceptor"
)

// Why a connection was refused: the reason label of
// kvselect_raft_connections_refused_total.
const (
	// reasonNoHandshake: the peer spoke something else (raft itself: a
	// node without a token or of an older release, or a stranger).
	reasonNoHandshake = "no_handshake"
	// reasonWrongAddress: the dialer meant another address than the one
	// this node advertises.
	reasonWrongAddress = "wrong_address"
	// reasonBadMAC: the peer's MAC matches none of this node's tokens (a
	// different token, a forgery or a replay).
	reasonBadMAC = "bad_mac"
	// reasonRefused: the acceptor closed the connection after the
	// dialer's MAC, which it did not accept.
	reasonRefused = "refused"
	// reasonTimeout: the handshake did not finish within its deadline.
	reasonTimeout = "timeout"
	// reasonClosed: the peer closed the connection mid-handshake.
	reasonClosed = "closed"
	// reasonBusy: too many inbound handshakes in progress.
	reasonBusy = "busy"
)

// handshakeError is a failed handshake and why (a reason above).
type handshakeError struct {
	reason string
	err    error
}

func (e *handshakeError) Error() string { return e.err.Error() }
func (e *handshakeError) Unwrap() error { return e.err }

func refuse(reason, format string, args ...any) error {
	return &handshakeError{reason: reason, err: fmt.Errorf(format, args...)}
}

// ioFailure classifies a read or write that failed mid-handshake.
func ioFailure(err error, doing string) error {
	if errors.Is(err, os.ErrDeadlineExceeded) {
		return &handshakeError{reason: reasonTimeout, err: fmt.Errorf("%s: no answer within the handshake deadline: %w", doing, err)}
	}
	return &handshakeError{reason: reasonClosed, err: fmt.Errorf("%s: %w", doing, err)}
}

// raftKey is the key a token gives Raft handshakes, never the token itself
// and never replica sync's (zmqsync keys its MACs under another label).
func raftKey(token string) []byte {
	h := hmac.New(sha256.New, []byte(token))
	h.Write([]byte(raftAuthLabel))
	return h.Sum(nil)
}

// handshakeMAC is what role proves with token over one connection's
// nonces and the address the dialer means to reach.
func handshakeMAC(token, role string, nonceA, nonceD []byte, addr string) []byte {
	h := hmac.New(sha256.New, raftKey(token))
	h.Write([]byte(raftAuthLabel))
	h.Write([]byte{0})
	h.Write([]byte(role))
	h.Write([]byte{0})
	h.Write(nonceA)
	h.Write(nonceD)
	h.Write(binary.BigEndian.AppendUint16(nil, uint16(len(addr))))
	h.Write([]byte(addr))
	return h.Sum(nil)
}

// macAccepted returns the one of sec's tokens (its first line or its
// second) under which mac proves role, "" for neither. Both are checked,
// with hmac.Equal.
func macAccepted(sec *authtoken.Secret, role string, nonceA, nonceD []byte, addr string, mac []byte) string {
	matched := ""
	if hmac.Equal(handshakeMAC(sec.Token, role, nonceA, nonceD, addr), mac) {
		matched = sec.Token
	}
	if sec.Also != "" && hmac.Equal(handshakeMAC(sec.Also, role, nonceA, nonceD, addr), mac) {
		matched = sec.Also
	}
	return matched
}

// acceptHandshake authenticates an inbound connection for a node that
// advertises self, within deadline, and returns the token the peer proved
// it holds. On success the connection is as it came, its deadline
// cleared; the caller closes it on failure.
func acceptHandshake(conn net.Conn, sec *authtoken.Secret, self string, deadline time.Time) (string, error) {
	token, err := acceptExchange(conn, sec, self, deadline)
	if err != nil {
		return "", err
	}
	if err := conn.SetDeadline(time.Time{}); err != nil {
		return "", ioFailure(err, "clear the handshake deadline")
	}
	return token, nil
}

func acceptExchange(conn net.Conn, sec *authtoken.Secret, self string, deadline time.Time) (string, error) {
	fail := func(err error) (string, error) { return "", err }
	if err := conn.SetDeadline(deadline); err != nil {
		return fail(ioFailure(err, "set the handshake deadline"))
	}
	nonceA := make([]byte, nonceSize)
	rand.Read(nonceA) // never fails (crypto/rand, Go 1.24)
	if _, err := conn.Write(append([]byte(raftAuthMagic), nonceA...)); err != nil {
		return fail(ioFailure(err, "send the challenge"))
	}
	head := make([]byte, len(raftAuthMagic)+nonceSize+2)
	if _, err := io.ReadFull(conn, head); err != nil {
		return fail(ioFailure(err, "read the answer"))
	}
	if string(head[:len(raftAuthMagic)]) != raftAuthMagic {
		return fail(refuse(reasonNoHandshake, "the peer did not answer the Raft handshake: a node without a token, one of a release before Raft authentication, or not kvselect"))
	}
	nonceD := head[len(raftAuthMagic) : len(raftAuthMagic)+nonceSize]
	n := int(binary.BigEndian.Uint16(head[len(head)-2:]))
	if n == 0 || n > maxAddrLen {
		return fail(refuse(reasonNoHandshake, "malformed handshake: an address of %d bytes", n))
	}
	rest := make([]byte, n+macSize)
	if _, err := io.ReadFull(conn, rest); err != nil {
		return fail(ioFailure(err, "read the answer"))
	}
	addr, mac := string(rest[:n]), rest[n:]
	refused := func(err error) (string, error) {
		_, _ = conn.Write([]byte{verdictRefused}) // best effort: the dialer counts a refusal, not an outage
		return fail(err)
	}
	if addr != self {
		return refused(refuse(reasonWrongAddress, "the peer means to reach %q, this node advertises %q", addr, self))
	}
	token := macAccepted(sec, roleDialer, nonceA, nonceD, addr, mac)
	if token == "" {
		return refused(refuse(reasonBadMAC, "the peer's MAC matches neither of this node's tokens: another token, a forgery or a replay"))
	}
	if _, err := conn.Write(append([]byte{verdictAccepted}, handshakeMAC(sec.Token, roleAcceptor, nonceA, nonceD, addr)...)); err != nil {
		return fail(ioFailure(err, "send this node's proof"))
	}
	return token, nil
}

// The acceptor's verdict on the dialer's proof, sent before its own.
const (
	verdictRefused  = 0
	verdictAccepted = 1
)

// dialHandshake authenticates an outbound connection to the peer that
// advertises target, within deadline, and returns the token the peer
// proved it holds: this node proves itself, then the peer must prove it
// holds one of this node's tokens, so that nothing of raft's goes to an
// impostor and no impostor's answer counts.
func dialHandshake(conn net.Conn, sec *authtoken.Secret, target string, deadline time.Time) (string, error) {
	token, err := dialExchange(conn, sec, target, deadline)
	if err != nil {
		return "", err
	}
	if err := conn.SetDeadline(time.Time{}); err != nil {
		return "", ioFailure(err, "clear the handshake deadline")
	}
	return token, nil
}

func dialExchange(conn net.Conn, sec *authtoken.Secret, target string, deadline time.Time) (string, error) {
	fail := func(err error) (string, error) { return "", err }
	if len(target) == 0 || len(target) > maxAddrLen {
		return fail(refuse(reasonWrongAddress, "cannot name address %q in a handshake", target))
	}
	if err := conn.SetDeadline(deadline); err != nil {
		return fail(ioFailure(err, "set the handshake deadline"))
	}
	hello := make([]byte, len(raftAuthMagic)+nonceSize)
	if _, err := io.ReadFull(conn, hello); err != nil {
		why := "the peer is stopping, has too many handshakes in progress, or is behind a proxy that cannot reach it"
		if errors.Is(err, os.ErrDeadlineExceeded) {
			why = "a peer without a token, or of a release before Raft authentication, sends none"
		}
		return fail(fmt.Errorf("%w (%s)", ioFailure(err, "wait for the peer's challenge"), why))
	}
	if string(hello[:len(raftAuthMagic)]) != raftAuthMagic {
		return fail(refuse(reasonNoHandshake, "the peer sent no Raft handshake challenge: not a kvselect Raft port"))
	}
	nonceA := hello[len(raftAuthMagic):]
	nonceD := make([]byte, nonceSize)
	rand.Read(nonceD)
	msg := append([]byte(raftAuthMagic), nonceD...)
	msg = binary.BigEndian.AppendUint16(msg, uint16(len(target)))
	msg = append(msg, target...)
	msg = append(msg, handshakeMAC(sec.Token, roleDialer, nonceA, nonceD, target)...)
	if _, err := conn.Write(msg); err != nil {
		return fail(ioFailure(err, "send this node's proof"))
	}
	verdict := make([]byte, 1)
	if _, err := io.ReadFull(conn, verdict); err != nil {
		// Ended without a verdict: the peer is stopping (or the network
		// cut the connection), no refusal.
		return fail(ioFailure(err, "wait for the peer's verdict"))
	}
	if verdict[0] != verdictAccepted {
		return fail(refuse(reasonRefused, "the peer refused this node's proof: it holds neither of this node's tokens, or advertises another address than %s", target))
	}
	proof := make([]byte, macSize)
	if _, err := io.ReadFull(conn, proof); err != nil {
		return fail(ioFailure(err, "wait for the peer's proof"))
	}
	token := macAccepted(sec, roleAcceptor, nonceA, nonceD, target, proof)
	if token == "" {
		return fail(refuse(reasonBadMAC, "the peer at %s did not prove it holds this cluster's token: an impostor, or another token", target))
	}
	return token, nil
}

// errTokenDropped fails the reads of a connection whose token the node no
// longer accepts.
var errTokenDropped = errors.New("the token this Raft connection was authenticated with is no longer accepted")

// authedConn is a connection authenticated under token. Once the node no
// longer accepts that token (the last phase of a rotation, or a file
// replaced by another token), its next read or write closes it and fails,
// before a byte reaches raft or leaves it: a connection outlives no token
// it was let in with. raft dials again, and the new connection proves a
// current token.
type authedConn struct {
	net.Conn
	token string
	auth  *authtoken.Holder
	// dropped is the error a read returns then: io.EOF for an inbound
	// connection, which raft's handler takes as the peer leaving (the
	// node logs why, once); errTokenDropped for an outbound one, which
	// fails the RPC.
	dropped error
	log     *slog.Logger
	once    sync.Once
}

func (c *authedConn) Read(p []byte) (int, error) {
	if err := c.check(); err != nil {
		return 0, err
	}
	return c.Conn.Read(p)
}

func (c *authedConn) Write(p []byte) (int, error) {
	if err := c.check(); err != nil {
		return 0, err
	}
	return c.Conn.Write(p)
}

// check closes the connection once its token is no longer accepted.
func (c *authedConn) check() error {
	if c.auth.Accepts(c.token) {
		return nil
	}
	c.once.Do(func() {
		c.Conn.Close()
		c.log.Info("closing a Raft connection: the token it was authenticated with is no longer accepted",
			"peer", c.RemoteAddr().String())
	})
	return c.dropped
}

// refusals counts refused Raft connections and logs them, one WARN per
// direction and reason a minute at most: a stranger knocking, or a peer
// with another token retrying every heartbeat, must not flood the log.
// An outbound handshake cut short (closed, timeout) is a peer that is
// down or stopping as much as anything: peerHealth reports those outages
// with the error, so they go to DEBUG only.
type refusals struct {
	counter *prometheus.CounterVec
	log     *slog.Logger
	every   time.Duration

	mu     sync.Mutex
	last   map[string]time.Time // by direction and reason: the last WARN
	quiet  map[string]int       // refusals since then not logged at WARN
	nowFor func() time.Time
}

func newRefusals(log *slog.Logger) *refusals {
	r := &refusals{
		counter: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kvselect_raft_connections_refused_total",
			Help: "Raft connections refused by the handshake (inbound: a peer did not authenticate to this node; outbound: a peer this node dialled did not).",
		}, []string{"direction", "reason"}),
		log: log, every: refusalLogEvery, last: map[string]time.Time{}, quiet: map[string]int{}, nowFor: time.Now,
	}
	for _, reason := range []string{reasonNoHandshake, reasonWrongAddress, reasonBadMAC, reasonTimeout, reasonClosed, reasonBusy} {
		r.counter.WithLabelValues("inbound", reason)
	}
	return r
}

// record counts and logs a refused connection; direction is "inbound" or
// "outbound", peer the remote address.
func (r *refusals) record(direction, peer string, err error) {
	reason := reasonClosed
	var he *handshakeError
	if errors.As(err, &he) {
		reason = he.reason
	}
	r.counter.WithLabelValues(direction, reason).Inc()
	if direction == "outbound" && (reason == reasonClosed || reason == reasonTimeout) {
		r.log.Debug("raft connection refused", "direction", direction, "reason", reason, "peer", peer, "err", err)
		return
	}
	key := direction + "/" + reason
	now := r.nowFor()
	r.mu.Lock()
	if last, ok := r.last[key]; ok && now.Sub(last) < r.every {
		r.quiet[key]++
		r.mu.Unlock()
		r.log.Debug("raft connection refused", "direction", direction, "reason", reason, "peer", peer, "err", err)
		return
	}
	skipped := r.quiet[key]
	r.last[key], r.quiet[key] = now, 0
	r.mu.Unlock()
	r.log.Warn("raft connection refused", "direction", direction, "reason", reason, "peer", peer, "err", err,
		"not_logged_since_last", skipped)
}
