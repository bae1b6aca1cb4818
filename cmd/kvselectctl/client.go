package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"
)

// Limits of the client.
const (
	maxRedirects  = 5 // 307 hops followed for one request
	maxTokenFile  = 64 << 10
	maxAnswer     = 1 << 30 // bytes of one answer (a /dump can be large)
	firstBackoff  = 50 * time.Millisecond
	maxBackoff    = time.Second
	headerIndex   = "X-Kvselect-Index"
	headerServed  = "X-Kvselect-Served-By"
	stateLeader   = "leader"
	redirectQuery = "redirect=true"
)

// Error codes the client acts on.
const (
	codeNotLeader      = "not_leader"
	codeNoLeader       = "no_leader"
	codeUnknownOutcome = "unknown_outcome"
)

// client talks to the nodes of --addr. It follows the leader itself for
// writes and linearizable reads (see viaLeader) and 307 redirects by hand
// (see send), so that a redirect keeps the method, body and token.
type client struct {
	addrs   []string // base URLs, in order of preference
	token   string
	timeout time.Duration // per request, and the budget of leader retries
	backoff time.Duration // first pause between leader retries; doubles up to maxBackoff
	hc      *http.Client
}

func newClient(addrList, tokenFile string, timeout time.Duration) (*client, error) {
	addrs, err := parseAddrs(addrList)
	if err != nil {
		return nil, err
	}
	if timeout <= 0 {
		return nil, usageErrorf("--timeout must be positive, got %v", timeout)
	}
	token, err := readToken(tokenFile)
	if err != nil {
		return nil, err
	}
	hc := &http.Client{
		Transport: http.DefaultTransport.(*http.Transport).Clone(),
		// Redirects are followed by send, which re-sends the body and the
		// Authorization header; net/http would drop the token across hosts.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	return &client{addrs: addrs, token: token, timeout: timeout, backoff: firstBackoff, hc: hc}, nil
}

// parseAddrs splits --addr into base URLs.
func parseAddrs(list string) ([]string, error) {
	var addrs []string
	for _, a := range strings.Split(list, ",") {
		if a = strings.TrimSpace(a); a == "" {
			continue
		}
		base := baseURL(a)
		if u, err := url.Parse(base); err != nil || u.Host == "" {
			return nil, usageErrorf("--addr: %q is not a host:port or URL", a)
		}
		addrs = append(addrs, base)
	}
	if len(addrs) == 0 {
		return nil, usageErrorf("--addr: no node address given")
	}
	return addrs, nil
}

// baseURL turns "host:port" into "http://host:port" and drops a trailing
// slash.
func baseURL(addr string) string {
	if !strings.Contains(addr, "://") {
		addr = "http://" + addr
	}
	return strings.TrimRight(addr, "/")
}

func readToken(path string) (string, error) {
	if path == "" {
		return "", nil
	}
	f, err := os.Open(path)
	if err != nil {
		return "", fmt.Errorf("--token-file: %w", err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxTokenFile))
	if err != nil {
		return "", fmt.Errorf("--token-file: %w", err)
	}
	token := strings.TrimSpace(string(data))
	if token == "" {
		return "", fmt.Errorf("--token-file: %s is empty", path)
	}
	return token, nil
}

// request is one API call; path includes the query.
type request struct {
	method string
	path   string
	body   []byte // nil: no body
}

// response is a whole answer, read before its request's timeout ends.
type response struct {
	status int
	header http.Header
	body   []byte
}

// read sends a read to the first node of --addr that answers.
func (c *client) read(ctx context.Context, req request) (*response, error) {
	_, resp, err := c.firstReachable(ctx, req)
	return checked(resp, err)
}

// viaLeader sends a write (or a linearizable read) to the leader, retrying
// with backoff for up to the timeout while the cluster has no leader or
// the node asked has lost it. An unknown outcome is never retried: the
// user decides.
func (c *client) viaLeader(ctx context.Context, req request, write bool) (*response, error) {
	deadline := time.Now().Add(c.timeout)
	pause := c.backoff
	for {
		resp, err := c.attempt(ctx, req, write)
		if err != nil || !leaderLost(resp) || time.Now().Add(pause).After(deadline) {
			return checked(resp, err)
		}
		if err := sleep(ctx, pause); err != nil {
			return nil, err
		}
		pause = min(2*pause, maxBackoff)
	}
}

// attempt resolves the leader through the first reachable node and sends
// req once: straight to the leader when its HTTP address is known, else
// to that node, asking a follower for a redirect on writes.
func (c *client) attempt(ctx context.Context, req request, write bool) (*response, error) {
	reached, view, err := c.clusterView(ctx)
	if err != nil {
		return nil, err
	}
	if leader := view.leaderURL(); leader != "" && leader != reached {
		resp, err := c.send(ctx, leader, req)
		if !unreachable(err) {
			return resp, err
		}
		// The leader's advertised address cannot be dialled from here; the
		// node we reached can still forward the request.
		return c.send(ctx, reached, req)
	}
	if write && view.State != stateLeader {
		req.path = withQuery(req.path, redirectQuery)
	}
	return c.send(ctx, reached, req)
}

// leaderView is the part of /cluster/status that leader following needs.
type leaderView struct {
	State  string `json:"state"`
	Leader struct {
		ID       string `json:"id"`
		HTTPAddr string `json:"http_addr"`
	} `json:"leader"`
}

func (v leaderView) leaderURL() string {
	if v.Leader.HTTPAddr == "" {
		return ""
	}
	return baseURL(v.Leader.HTTPAddr)
}

// clusterView asks the first reachable node for its view of the leader.
func (c *client) clusterView(ctx context.Context) (string, leaderView, error) {
	var view leaderView
	reached, resp, err := c.firstReachable(ctx, request{method: http.MethodGet, path: "/cluster/status"})
	if resp, err = checked(resp, err); err != nil {
		return "", view, err
	}
	if err := json.Unmarshal(resp.body, &view); err != nil {
		return "", view, fmt.Errorf("%s/cluster/status: decoding the answer: %w", reached, err)
	}
	return reached, view, nil
}

// firstReachable sends req to each node of --addr in turn until one can
// be dialled, and returns that node's base URL and answer.
func (c *client) firstReachable(ctx context.Context, req request) (string, *response, error) {
	var errs []error
	for _, base := range c.addrs {
		resp, err := c.send(ctx, base, req)
		if unreachable(err) {
			errs = append(errs, err)
			continue
		}
		return base, resp, err
	}
	return "", nil, fmt.Errorf("no node reachable: %w", errors.Join(errs...))
}

// send makes one request against base, following up to maxRedirects
// 307/308 redirects with the same method, body and token.
func (c *client) send(ctx context.Context, base string, req request) (*response, error) {
	target := base + req.path
	for hops := 0; ; hops++ {
		resp, err := c.exchange(ctx, req.method, target, req.body)
		if err != nil || !isRedirect(resp.status) {
			return resp, err
		}
		if hops == maxRedirects {
			return nil, fmt.Errorf("%s %s: stopped after %d redirects", req.method, base+req.path, maxRedirects)
		}
		if target, err = nextLocation(target, resp.header.Get("Location")); err != nil {
			return nil, err
		}
	}
}

// exchange is one HTTP round trip, bounded by the client's timeout.
func (c *client) exchange(ctx context.Context, method, target string, body []byte) (*response, error) {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	hreq, err := http.NewRequestWithContext(ctx, method, target, rd)
	if err != nil {
		return nil, err
	}
	hreq.Header.Set("Accept", "application/json")
	if body != nil {
		hreq.Header.Set("Content-Type", "application/json")
	}
	if c.token != "" {
		hreq.Header.Set("Authorization", "Bearer "+c.token)
	}
	hresp, err := c.hc.Do(hreq)
	if err != nil {
		return nil, err
	}
	defer hresp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(hresp.Body, maxAnswer+1))
	if err != nil {
		return nil, fmt.Errorf("%s %s: reading the answer: %w", method, target, err)
	}
	if len(data) > maxAnswer {
		return nil, fmt.Errorf("%s %s: answer larger than %d bytes", method, target, maxAnswer)
	}
	return &response{status: hresp.StatusCode, header: hresp.Header, body: data}, nil
}

func isRedirect(status int) bool {
	return status == http.StatusTemporaryRedirect || status == http.StatusPermanentRedirect
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
	return base.ResolveReference(loc).String(), nil
}

// unreachable reports whether err means the node could not be dialled, so
// the request never reached it and trying another node is safe.
func unreachable(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}

// leaderLost reports a 503 that a retry against the new leader can fix.
func leaderLost(resp *response) bool {
	if resp.status != http.StatusServiceUnavailable {
		return false
	}
	code := decodeAPIError(resp).code
	return code == codeNotLeader || code == codeNoLeader
}

func withQuery(path, query string) string {
	if strings.Contains(path, "?") {
		return path + "&" + query
	}
	return path + "?" + query
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// apiError is an answer outside 2xx.
type apiError struct {
	status  int
	code    string
	message string
}

func (e *apiError) Error() string {
	return fmt.Sprintf("%s: %s (HTTP %d)", e.code, e.message, e.status)
}

// checked turns an answer outside 2xx into an *apiError.
func checked(resp *response, err error) (*response, error) {
	if err != nil {
		return nil, err
	}
	if resp.status < 200 || resp.status > 299 {
		return resp, decodeAPIError(resp)
	}
	return resp, nil
}

// decodeAPIError reads {"error", "code"}, and also the seed's busy body
// {"message", "type", "code": 503}; anything else keeps the status text.
func decodeAPIError(resp *response) *apiError {
	var body struct {
		Error   string          `json:"error"`
		Code    json.RawMessage `json:"code"`
		Message string          `json:"message"`
		Type    string          `json:"type"`
	}
	_ = json.Unmarshal(resp.body, &body)
	e := &apiError{status: resp.status, message: body.Error}
	if json.Unmarshal(body.Code, &e.code) != nil || e.code == "" {
		e.code = body.Type
	}
	if e.code == "" {
		e.code = strings.ToLower(strings.ReplaceAll(http.StatusText(resp.status), " ", "_"))
	}
	if e.message == "" {
		e.message = body.Message
	}
	if e.message == "" {
		e.message = snippet(resp.body)
	}
	if e.message == "" {
		e.message = http.StatusText(resp.status)
	}
	return e
}

// snippet is the start of a non-JSON error body, on one line.
func snippet(b []byte) string {
	const max = 200
	s := strings.Join(strings.Fields(string(b)), " ")
	if len(s) > max {
		s = s[:max] + "..."
	}
	return s
}
