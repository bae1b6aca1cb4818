package cluster

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

// peerClient makes the node's own inter-node HTTP calls (join, metadata).
// Client requests that a follower forwards go through the http package,
// which proxies them as they came.
type peerClient struct {
	http  *http.Client
	token string
}

func newPeerClient(token string, timeout time.Duration) *peerClient {
	return &peerClient{http: &http.Client{Timeout: timeout}, token: token}
}

// RemoteError is a non-2xx answer from another node, with the machine code
// of its JSON error body. It unwraps to this package's sentinel for the
// codes that have one, so callers can tell "nothing written, retry
// elsewhere" from a verdict.
type RemoteError struct {
	Status  int
	Code    string
	Message string
}

func (e *RemoteError) Error() string {
	return fmt.Sprintf("remote %d %s: %s", e.Status, e.Code, e.Message)
}

func (e *RemoteError) Unwrap() error {
	switch e.Code {
	case "not_leader":
		return ErrNotLeader
	case "no_leader":
		return ErrNoLeader
	case "unknown_outcome":
		return ErrUnknownOutcome
	case "conflict":
		return ErrMembership
	}
	return nil
}

// BaseURL turns "host:port" or a URL into a base URL without a trailing
// slash.
func BaseURL(addr string) string {
	addr = strings.TrimRight(addr, "/")
	if strings.HasPrefix(addr, "http://") || strings.HasPrefix(addr, "https://") {
		return addr
	}
	return "http://" + addr
}

// post sends body as JSON to base+path. A transport failure is returned as
// is; a non-2xx answer as *RemoteError.
func (c *peerClient) post(ctx context.Context, base, path string, body any) error {
	raw, err := json.Marshal(body)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, BaseURL(base)+path, bytes.NewReader(raw))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if resp.StatusCode/100 == 2 {
		return nil
	}
	var eb struct {
		Error string `json:"error"`
		Code  string `json:"code"`
	}
	if json.Unmarshal(data, &eb) != nil || eb.Code == "" {
		eb.Error, eb.Code = strings.TrimSpace(string(data)), "http_"+http.StatusText(resp.StatusCode)
	}
	return &RemoteError{Status: resp.StatusCode, Code: eb.Code, Message: eb.Error}
}

// retryable reports whether a failed inter-node call may be tried again:
// nothing was decided (no leader, not the leader, network trouble, the
// other node shutting down). Verdicts (4xx) are final.
func retryable(err error) bool {
	var re *RemoteError
	if errors.As(err, &re) {
		return re.Status >= 500
	}
	return err != nil
}
