package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/kvselect/kvselect/api"
	"github.com/kvselect/kvselect/internal/poll"
)

// Config configures a Client.
type Config struct {
	// Addrs are the nodes' base URLs ("http://host:port", or "host:port"),
	// in order of preference. The first that answers is the client's
	// home node. Required.
	Addrs []string
	// Token is sent as a bearer token on every request.
	Token string
	// HTTPClient makes the requests; nil means a client with the default
	// transport. The client follows 307 redirects itself (keeping the
	// method, body and token), so its CheckRedirect is replaced.
	HTTPClient *http.Client
	// CAFile names a PEM file of the CA certificates that sign the
	// nodes' HTTPS certificates, trusted instead of the system's roots
	// (a cluster with its own CA). It applies to HTTPClient's transport
	// when that is nil or an *http.Transport (a copy is changed).
	CAFile string
	// RetryTimeout bounds how long a leader-only request keeps retrying
	// while no leader answers (default 10 s). The context bounds it too.
	RetryTimeout time.Duration
	// MaxAnswerBytes bounds an answer read into memory (default 1 GiB:
	// a dump can be large).
	MaxAnswerBytes int64
	// Pinned sends every call to the first address, once: no failover,
	// no leader following, no retries. It is for callers that route
	// requests themselves, such as a node calling its peers through
	// fault-injection proxies.
	Pinned bool
}

// Client talks to a kvselect cluster. It is safe for concurrent use.
type Client struct {
	addrs     []string
	home      atomic.Int64 // index into addrs
	token     string
	hc        *http.Client
	retryFor  time.Duration
	maxAnswer int64
	pinned    bool
	index     atomic.Uint64 // highest catalog index seen
}

// Limits and pacing of retries.
const (
	maxRedirects = 5
	firstBackoff = 50 * time.Millisecond
	maxBackoff   = time.Second
)

// New returns a client for the nodes of cfg.Addrs.
func New(cfg Config) (*Client, error) {
	c := &Client{token: cfg.Token, retryFor: cfg.RetryTimeout, maxAnswer: cfg.MaxAnswerBytes, pinned: cfg.Pinned}
	for _, a := range cfg.Addrs {
		if a = strings.TrimSpace(a); a == "" {
			continue
		}
		base := BaseURL(a)
		if u, err := url.Parse(base); err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
			return nil, fmt.Errorf("client: %q is not a host:port or http(s) URL", a)
		}
		c.addrs = append(c.addrs, base)
	}
	if len(c.addrs) == 0 {
		return nil, errors.New("client: no node address given")
	}
	if c.retryFor <= 0 {
		c.retryFor = 10 * time.Second
	}
	if c.maxAnswer <= 0 {
		c.maxAnswer = 1 << 30
	}
	hc := http.Client{Transport: http.DefaultTransport}
	if cfg.HTTPClient != nil {
		hc = *cfg.HTTPClient
	}
	if cfg.CAFile != "" {
		tc, err := TLSConfig(cfg.CAFile)
		if err != nil {
			return nil, fmt.Errorf("client: %w", err)
		}
		if hc.Transport, err = withTLS(hc.Transport, tc); err != nil {
			return nil, fmt.Errorf("client: %w", err)
		}
	}
	hc.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	c.hc = &hc
	return c, nil
}

// BaseURL turns "host:port" into "http://host:port" and drops a trailing
// slash.
func BaseURL(addr string) string { return BaseURLWithScheme("http", addr) }

// BaseURLWithScheme turns "host:port" into "<scheme>://host:port" and
// drops a trailing slash; an address that has a scheme keeps it.
func BaseURLWithScheme(scheme, addr string) string {
	if !strings.Contains(addr, "://") {
		addr = scheme + "://" + addr
	}
	return strings.TrimRight(addr, "/")
}

// peerURL is the base URL of a node address (host:port) that the node at
// from reported (the leader in /cluster/status): a cluster serves one
// scheme, so it is from's.
func peerURL(from, addr string) string {
	scheme := "http"
	if u, err := url.Parse(from); err == nil && u.Scheme != "" {
		scheme = u.Scheme
	}
	return BaseURLWithScheme(scheme, addr)
}

// CatalogIndex is the highest catalog index this client has seen.
func (c *Client) CatalogIndex() uint64 { return c.index.Load() }

// ObserveCatalogIndex raises the client's catalog index to idx (an index
// another client saw), so this client's next selections and catalog reads
// see everything up to it.
func (c *Client) ObserveCatalogIndex(idx uint64) {
	for {
		cur := c.index.Load()
		if idx <= cur || c.index.CompareAndSwap(cur, idx) {
			return
		}
	}
}

// Home is the base URL of the node the client sends selections to.
func (c *Client) Home() string { return c.addrs[c.home.Load()] }

// ResponseInfo describes the answer a call got, for callers that want more
// than its typed result (kvselectctl prints where a write was applied).
type ResponseInfo struct {
	// Node is the base URL the answer came from.
	Node   string
	Status int
	// ServedBy is the node that served a leader-only request.
	ServedBy string
	// CatalogIndex is the answer's X-Kvselect-Index (0 when absent).
	CatalogIndex uint64
	// NotApplied is set when a forwarded write was answered before the
	// node that forwarded it had applied it (X-Kvselect-Applied: false).
	NotApplied bool
	// CatalogBehind is the index a node had applied when it answered a
	// selection from its own catalog, short of the session's index
	// (X-Kvselect-Catalog-Behind; 0 when absent): it was cut off from the
	// leader, and the answer may not reflect the latest catalog writes.
	// Set RequireCatalog on the request to get catalog_behind instead.
	CatalogBehind uint64
	// Replayed is set on a SelectAndReserve answer that repeats an
	// earlier booking of the same reservation id and prompt
	// (X-Kvselect-Replayed): nothing new was booked.
	Replayed bool
	// Body is the answer's body as sent.
	Body []byte
}

type infoKey struct{}

// WithResponseInfo returns a context under which a call fills info with
// the answer it got.
func WithResponseInfo(ctx context.Context, info *ResponseInfo) context.Context {
	return context.WithValue(ctx, infoKey{}, info)
}

// Retry describes a leader-only call that did not succeed and is about to
// be sent again, after a pause, while the cluster has no leader it can
// reach.
type Retry struct {
	Attempts int           // attempts made so far
	Elapsed  time.Duration // since the first attempt
	Err      error         // why the last attempt did not succeed
}

type retryKey struct{}

// WithRetryNotify returns a context under which a leader-only call (a
// catalog or membership write, a linearizable read) calls notify before
// each pause between its attempts, on the caller's goroutine, so that a
// caller can say why it is still waiting (kvselectctl prints progress).
func WithRetryNotify(ctx context.Context, notify func(Retry)) context.Context {
	return context.WithValue(ctx, retryKey{}, notify)
}

// kind says where a call goes and when it may be sent again.
type kind int

const (
	read       kind = iota // no effect: resent anywhere, even after a lost answer
	booking                // changes this node's load: never resent once sent
	write                  // leader-only and idempotent: resent after an unknown outcome
	writeOnce              // leader-only, not idempotent: never resent once it may have acted
	leaderRead             // linearizable read on the leader
)

// call is one API request.
type call struct {
	method  string
	path    string // with the query
	body    []byte // nil: none
	kind    kind
	session bool                  // send the session's catalog index
	accept  func(status int) bool // answers that are not errors (default 2xx)
}

// answer is a whole answer, read before its request's context ended.
type answer struct {
	node   string
	url    string
	status int
	header http.Header
	body   []byte
}

// do runs a call and decodes its answer into out (unless out is nil).
func (c *Client) do(ctx context.Context, cl call, out any) error {
	var ans *answer
	var err error
	switch {
	case c.pinned:
		if ans, _, err = c.exchange(ctx, c.addrs[0], cl); err == nil {
			err = c.verdict(ctx, cl, ans, false)
		}
	case cl.kind == write || cl.kind == writeOnce || cl.kind == leaderRead:
		ans, err = c.viaLeader(ctx, cl)
	default:
		ans, err = c.onHome(ctx, cl)
	}
	if err != nil {
		return err
	}
	if out != nil && len(bytes.TrimSpace(ans.body)) > 0 {
		if err := json.Unmarshal(ans.body, out); err != nil {
			return fmt.Errorf("%s %s: decoding the answer: %w", cl.method, ans.url, err)
		}
	}
	return nil
}

// onHome sends the call to the home node and judges its answer.
func (c *Client) onHome(ctx context.Context, cl call) (*answer, error) {
	ans, _, err := c.homeAttempt(ctx, cl, cl.kind == read)
	if err != nil {
		return nil, err
	}
	return ans, c.verdict(ctx, cl, ans, false)
}

// viaLeader sends a leader-only call through the home node, which
// forwards it. When nothing was written (no leader, not the leader, node
// unreachable) it finds the leader and sends the call there instead,
// retrying with backoff for up to RetryTimeout. An idempotent write whose
// outcome is unknown is sent again; anything else is returned.
func (c *Client) viaLeader(ctx context.Context, cl call) (*answer, error) {
	start := time.Now()
	deadline := start.Add(c.retryFor)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d // give up with the last answer rather than a bare context error
	}
	notify, _ := ctx.Value(retryKey{}).(func(Retry))
	pause, target, afterUnknown := firstBackoff, "", false
	var previous error // why the attempt before this one did not succeed
	for attempts := 1; ; attempts++ {
		var ans *answer
		var sent bool
		var err error
		if target == "" {
			ans, sent, err = c.homeAttempt(ctx, cl, false)
		} else {
			ans, sent, err = c.exchange(ctx, target, cl)
		}
		var last error
		switch {
		case ctx.Err() != nil && previous != nil:
			return nil, fmt.Errorf("%w (the answer before: %v)", ctx.Err(), previous)
		case ctx.Err() != nil:
			return nil, ctx.Err()
		case err == nil:
			v := c.verdict(ctx, cl, ans, afterUnknown)
			if v == nil {
				return ans, nil
			}
			e := v.(*Error)
			switch {
			case e.Code.NothingWritten():
				target = c.findLeader(ctx, target)
			case e.Code == api.CodeUnknownOutcome && cl.kind == write:
				afterUnknown = true
			default:
				return ans, e
			}
			last = e
		case !sent:
			// The node was never reached. If it was the leader's own
			// address, it may be one this client cannot dial: go back
			// through the home node.
			if target != "" {
				target = ""
			} else {
				target = c.findLeader(ctx, "")
			}
			last = err
		case cl.kind == leaderRead:
			last = err
		case cl.kind == write:
			afterUnknown, last = true, err
		default:
			return nil, fmt.Errorf("%w (the request reached a node; it may or may not have taken effect)", err)
		}
		if time.Now().Add(pause).After(deadline) {
			return nil, last
		}
		if notify != nil {
			notify(Retry{Attempts: attempts, Elapsed: time.Since(start), Err: last})
		}
		if err := poll.Sleep(ctx, pause); err != nil {
			return nil, err
		}
		pause, previous = min(2*pause, maxBackoff), last
	}
}

// homeAttempt sends the call to the home node, moving on to the next
// address while a node cannot be reached (nothing was sent) and, with
// lostToo, when its answer was lost (reads only: they may be sent again).
// The node that answers becomes home. sent reports whether a failed
// attempt may have reached a node.
func (c *Client) homeAttempt(ctx context.Context, cl call, lostToo bool) (ans *answer, sent bool, err error) {
	start := c.home.Load()
	var errs []error
	for i := range int64(len(c.addrs)) {
		idx := (start + i) % int64(len(c.addrs))
		ans, sent, err := c.exchange(ctx, c.addrs[idx], cl)
		if err == nil {
			if i > 0 {
				c.home.CompareAndSwap(start, idx)
			}
			return ans, true, nil
		}
		if ctx.Err() != nil || (sent && !lostToo) {
			return nil, sent, err
		}
		errs = append(errs, err)
	}
	return nil, false, fmt.Errorf("no kvselect node reachable: %w", errors.Join(errs...))
}

// findLeader asks the nodes for the leader's HTTP address; it returns
// its base URL, or "" (go through the home node) when no node knows it.
// A leader at avoid (just found unreachable) is not returned.
func (c *Client) findLeader(ctx context.Context, avoid string) string {
	for _, base := range c.addrs {
		ans, _, err := c.exchange(ctx, base, call{method: http.MethodGet, path: api.PathClusterStatus, kind: read})
		if err != nil || ans.status != http.StatusOK {
			continue
		}
		var st api.ClusterStatus
		if json.Unmarshal(ans.body, &st) != nil || st.Leader.ID == "" {
			continue
		}
		leader := base
		if st.Leader.ID != st.NodeID {
			if st.Leader.HTTPAddr == "" {
				continue
			}
			leader = peerURL(base, st.Leader.HTTPAddr)
		}
		if leader != avoid {
			return leader
		}
	}
	return ""
}

// verdict turns an answer the call does not accept into an *Error, and
// records what the answer says for the session and the caller.
func (c *Client) verdict(ctx context.Context, cl call, ans *answer, afterUnknown bool) error {
	ok := ans.status/100 == 2
	if cl.accept != nil {
		ok = cl.accept(ans.status)
	}
	idx, _ := strconv.ParseUint(ans.header.Get(api.HeaderIndex), 10, 64)
	if ok && idx > 0 {
		c.ObserveCatalogIndex(idx)
	}
	if info, _ := ctx.Value(infoKey{}).(*ResponseInfo); info != nil {
		behind, _ := strconv.ParseUint(ans.header.Get(api.HeaderCatalogBehind), 10, 64)
		*info = ResponseInfo{Node: ans.node, Status: ans.status, ServedBy: ans.header.Get(api.HeaderServedBy),
			CatalogIndex: idx, NotApplied: ans.header.Get(api.HeaderApplied) == "false", Body: ans.body,
			CatalogBehind: behind, Replayed: ans.header.Get(api.HeaderReplayed) == "true"}
	}
	if ok {
		return nil
	}
	e := decodeError(cl.method, ans.url, ans.status, ans.body)
	e.AfterUnknownOutcome = afterUnknown
	return e
}

// exchange is one HTTP round trip to base, following up to maxRedirects
// 307/308 redirects with the same method, body and token. sent reports
// whether a connection was made (after which the request may have
// reached the node).
func (c *Client) exchange(ctx context.Context, base string, cl call) (ans *answer, sent bool, err error) {
	target := base + cl.path
	for hops := 0; ; hops++ {
		ans, s, err := c.roundTrip(ctx, cl, target)
		sent = sent || s
		if err != nil || (ans.status != http.StatusTemporaryRedirect && ans.status != http.StatusPermanentRedirect) {
			if ans != nil {
				ans.node = base
			}
			return ans, sent, err
		}
		if hops == maxRedirects {
			return nil, sent, fmt.Errorf("%s %s: stopped after %d redirects", cl.method, base+cl.path, maxRedirects)
		}
		if target, err = nextLocation(target, ans.header.Get("Location")); err != nil {
			return nil, sent, err
		}
	}
}

func (c *Client) roundTrip(ctx context.Context, cl call, target string) (*answer, bool, error) {
	var connected atomic.Bool
	ctx = httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{GotConn: func(httptrace.GotConnInfo) { connected.Store(true) }})
	var rd io.Reader
	if cl.body != nil {
		rd = bytes.NewReader(cl.body)
	}
	req, err := http.NewRequestWithContext(ctx, cl.method, target, rd)
	if err != nil {
		return nil, false, err
	}
	req.Header.Set("Accept", "application/json")
	if cl.body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.token != "" {
		req.Header.Set(api.HeaderAuthorization, api.Bearer(c.token))
	}
	if idx := c.index.Load(); cl.session && idx > 0 {
		req.Header.Set(api.HeaderIndex, strconv.FormatUint(idx, 10))
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return nil, connected.Load(), err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, c.maxAnswer+1))
	if err != nil {
		return nil, true, fmt.Errorf("%s %s: reading the answer: %w", cl.method, target, err)
	}
	if int64(len(body)) > c.maxAnswer {
		return nil, true, fmt.Errorf("%s %s: answer larger than %d bytes", cl.method, target, c.maxAnswer)
	}
	return &answer{url: target, status: resp.StatusCode, header: resp.Header, body: body}, true, nil
}

// nextLocation resolves a redirect's Location against the URL that gave it.
func nextLocation(from, location string) (string, error) {
	if location == "" {
		return "", fmt.Errorf("%s: redirect without a Location", from)
	}
	base, err := url.Parse(from)
	if err != nil {
		return "", err
	}
	loc, err := url.Parse(location)
	if err != nil {
		return "", fmt.Errorf("%s: bad redirect Location %q: %w", from, location, err)
	}
	next := base.ResolveReference(loc)
	if base.Scheme == "https" && next.Scheme != "https" {
		// The redirect is followed with the token: never into clear text.
		return "", fmt.Errorf("%s: refused a redirect from https to %s (%s): the token would cross the network in clear text",
			from, next.Scheme, location)
	}
	return next.String(), nil
}
