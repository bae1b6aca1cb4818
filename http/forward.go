package http

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/kvselect/kvselect/api"
	"github.com/kvselect/kvselect/client"
	"github.com/kvselect/kvselect/cluster"
	"github.com/kvselect/kvselect/internal/poll"
)

// newForwardClient returns the client that forwards to the leader, with
// the TLS configuration of calls to peers (nil: the system's roots). Its
// dial timeout is short: a leader that vanished without a reset (power
// off, partition) must not hold a write for the whole forward timeout
// while another node has taken over.
func newForwardClient(tlsConfig *tls.Config) *http.Client {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.DialContext = (&net.Dialer{Timeout: time.Second, KeepAlive: 30 * time.Second}).DialContext
	t.MaxIdleConnsPerHost = 16
	if tlsConfig != nil {
		t.TLSClientConfig = tlsConfig.Clone()
	}
	return &http.Client{Transport: t}
}

// peerURL is the base URL of a peer's HTTP address (host:port), in the
// cluster's scheme.
func (s *Service) peerURL(addr string) string {
	return client.BaseURLWithScheme(s.cfg.PeerScheme, addr)
}

// maxForwardedAnswer bounds a leader's answer held in memory before it is
// relayed (a linearizable GET /workers of a large catalog).
const maxForwardedAnswer = 64 << 20

// leaderRoute runs h on the leader. On a follower it forwards the request,
// as received, to the leader and relays the answer (or answers 307 to the
// leader with ?redirect=true). While no leader is known it waits up to the
// node's LeaderWait, then fails with no_leader. A forward that fails before
// anything was sent, or that the target refuses because it is not the
// leader, is retried against the new leader; one whose fate is unknown is
// 503 unknown_outcome.
func (s *Service) leaderRoute(h handler) handler {
	return func(w http.ResponseWriter, r *http.Request) error {
		body, err := readBody(w, r)
		if err != nil {
			return err
		}
		node := s.cfg.Leader
		forwarded := r.Header.Get(api.HeaderForwardedBy) != ""
		wait, cancel := context.WithTimeout(r.Context(), node.LeaderWait())
		defer cancel()
		for backoff := 10 * time.Millisecond; ; backoff = min(2*backoff, 250*time.Millisecond) {
			if forwarded || node.IsLeader() {
				w.Header().Set(api.HeaderServedBy, node.ID())
				r.Body = io.NopCloser(bytes.NewReader(body))
				err := h(w, r)
				if idx := w.Header().Get(api.HeaderIndex); forwarded && err == nil && followerWaits(r.Method, idx) {
					if n, perr := strconv.ParseUint(idx, 10, 64); perr == nil {
						node.AnnounceCommit(n)
					}
				}
				if forwarded || !errors.Is(err, cluster.ErrNotLeader) {
					return err
				}
				w.Header().Del(api.HeaderServedBy) // lost leadership before writing anything
			}
			leader, err := node.WaitForLeaderHTTP(wait)
			if err != nil {
				return err
			}
			if leader.ID != node.ID() {
				if r.URL.Query().Get(api.QueryRedirect) == api.RedirectEnabled {
					return s.redirectToLeader(w, r, leader)
				}
				if done, err := s.forward(w, r, body, node.ID(), leader); done {
					return err
				}
			}
			if poll.Sleep(wait, backoff) != nil {
				return fmt.Errorf("%w: the leader changed repeatedly for %v", cluster.ErrNoLeader, node.LeaderWait())
			}
		}
	}
}

// linearizableOnLeader applies leaderRoute only to linearizable reads.
func (s *Service) linearizableOnLeader(h handler) handler {
	lead := s.leaderRoute(h)
	return func(w http.ResponseWriter, r *http.Request) error {
		if r.URL.Query().Get(api.QueryConsistency) == api.ConsistencyLinearizable {
			return lead(w, r)
		}
		return h(w, r)
	}
}

func (s *Service) redirectToLeader(w http.ResponseWriter, r *http.Request, leader cluster.LeaderInfo) error {
	if leader.HTTPAddr == "" {
		return fmt.Errorf("%w: the HTTP address of leader %s is not known yet", cluster.ErrNoLeader, leader.ID)
	}
	loc := s.peerURL(leader.HTTPAddr) + r.URL.RequestURI()
	w.Header().Set("Location", loc)
	return writeJSON(w, http.StatusTemporaryRedirect, api.Redirect{Leader: leader.ID, Location: loc})
}

// forwardedHeaders are the request headers a forward carries: the body's
// type and the client's read-your-writes index. Its credentials are the
// node's own (forward).
var forwardedHeaders = []string{"Content-Type", api.HeaderIndex}

// relayedHeaders are the leader's answer headers a follower passes back.
var relayedHeaders = []string{"Content-Type", api.HeaderIndex, api.HeaderServedBy, "Retry-After", "Location", "WWW-Authenticate"}

// forward sends the request to the leader and relays its answer. It
// authenticates as this node, with its admin token (SPEC §11): this node
// has already checked the client's token against the route, and the
// leader then need not know the selection token, nor share the token a
// client holds in the middle of a rotation. A node without a token passes
// on the client's Authorization. done is
// false when nothing reached a leader (connection refused, or the target
// says it is not the leader): the caller may try again. A write's answer
// is relayed once this node has applied the write itself (up to
// CatalogWait), so the client reads its write on the node it wrote
// through; past the wait it is relayed with X-Kvselect-Applied: false.
func (s *Service) forward(w http.ResponseWriter, r *http.Request, body []byte, self string, leader cluster.LeaderInfo) (done bool, err error) {
	ctx, cancel := context.WithTimeout(r.Context(), s.cfg.ForwardTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, r.Method, s.peerURL(leader.DialHTTP)+r.URL.RequestURI(), bytes.NewReader(body))
	if err != nil {
		return true, err
	}
	for _, h := range forwardedHeaders {
		if v := r.Header.Get(h); v != "" {
			req.Header.Set(h, v)
		}
	}
	if token := s.cfg.Auth.Token(); token != "" {
		req.Header.Set(api.HeaderAuthorization, api.Bearer(token))
	} else if v := r.Header.Get(api.HeaderAuthorization); v != "" {
		req.Header.Set(api.HeaderAuthorization, v)
	}
	req.Header.Set(api.HeaderForwardedBy, self)
	// Nothing can have reached the leader unless a connection was
	// obtained: a failed or timed-out dial is safe to retry.
	var connected atomic.Bool
	req = req.WithContext(httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{
		GotConn: func(httptrace.GotConnInfo) { connected.Store(true) },
	}))
	resp, err := s.client.Do(req)
	if err != nil {
		if !connected.Load() {
			s.metrics.forwards.WithLabelValues("retry").Inc()
			return false, nil
		}
		s.metrics.forwards.WithLabelValues("unknown").Inc()
		if r.Method == http.MethodGet {
			return true, fmt.Errorf("%w: reading from leader %s: %v", cluster.ErrNoLeader, leader.ID, err)
		}
		return true, fmt.Errorf("%w: forwarded to leader %s: %v", cluster.ErrUnknownOutcome, leader.ID, err)
	}
	defer resp.Body.Close()
	answer, err := io.ReadAll(io.LimitReader(resp.Body, maxForwardedAnswer+1))
	switch {
	case err != nil && r.Method == http.MethodGet:
		return true, fmt.Errorf("%w: reading from leader %s: %v", cluster.ErrNoLeader, leader.ID, err)
	case err != nil:
		return true, fmt.Errorf("%w: answer of leader %s lost: %v", cluster.ErrUnknownOutcome, leader.ID, err)
	case len(answer) > maxForwardedAnswer:
		return true, fmt.Errorf("answer of leader %s exceeds %d bytes", leader.ID, maxForwardedAnswer)
	}
	if resp.StatusCode == http.StatusServiceUnavailable && nothingWritten(answer) {
		s.metrics.forwards.WithLabelValues("retry").Inc()
		return false, nil
	}
	if (resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden) && s.cfg.Auth.Token() != "" {
		s.log.Warn("the leader refused this node's own token on a forwarded request: do the nodes' --auth-token-file differ (a rotation not staged with two-line files)?",
			"leader", leader.ID, "status", resp.StatusCode, "path", r.URL.Path)
	}
	s.metrics.forwards.WithLabelValues("relayed").Inc()
	for _, h := range relayedHeaders {
		if v := resp.Header.Get(h); v != "" {
			w.Header().Set(h, v)
		}
	}
	if resp.StatusCode/100 == 2 && followerWaits(r.Method, resp.Header.Get(api.HeaderIndex)) {
		if !s.appliedHere(r, resp.Header.Get(api.HeaderIndex)) {
			s.metrics.forwards.WithLabelValues("unapplied").Inc()
			w.Header().Set(api.HeaderApplied, "false")
		}
	}
	w.WriteHeader(resp.StatusCode)
	_, _ = w.Write(answer)
	return true, nil
}

// followerWaits reports whether a follower relaying a successful answer
// waits until it has applied the answer's catalog index before passing it
// on: for writes that carry one. The leader announces the commit of those
// at once (AnnounceCommit), so that the wait is short.
func followerWaits(method, index string) bool {
	return method != http.MethodGet && method != http.MethodHead && index != ""
}

// appliedHere waits, up to CatalogWait, for this node to apply the catalog
// index a forwarded write's answer carries; it reports whether it did (or
// the answer carries none).
func (s *Service) appliedHere(r *http.Request, index string) bool {
	if index == "" {
		return true
	}
	idx, err := strconv.ParseUint(index, 10, 64)
	if err != nil {
		return false
	}
	ctx, cancel := context.WithTimeout(r.Context(), s.cfg.CatalogWait)
	defer cancel()
	return s.cfg.Catalog.WaitApplied(ctx, idx) == nil
}

// nothingWritten reports whether a 503 answer means the request never
// reached a leader's log (api.Code.NothingWritten).
func nothingWritten(answer []byte) bool {
	var eb api.Error
	return json.Unmarshal(answer, &eb) == nil && eb.Code.NothingWritten()
}
