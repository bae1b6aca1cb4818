package cluster

import (
	"context"
	"crypto/tls"
	"errors"
	"net/http"
	"time"

	"github.com/kvselect/kvselect/api"
	"github.com/kvselect/kvselect/client"
	"github.com/kvselect/kvselect/fsm"
	"github.com/kvselect/kvselect/internal/authtoken"
)

// peerClient makes the node's own calls to other nodes (join, metadata)
// with the Go client, pinned to the address it is given: the node routes
// these calls itself (through --peer-dial overrides), so the client must
// neither follow the leader elsewhere nor retry on its own. Client
// requests that a follower forwards go through the http package, which
// checks the client's token and forwards them as the node.
type peerClient struct {
	hc     *http.Client
	auth   *authtoken.Holder
	scheme string // of addresses given as host:port
}

// newPeerClient returns the client of the node's own calls: scheme is
// "http" or "https" (cluster.Config.PeerScheme), tc the TLS configuration
// of https calls (nil: the system's roots).
func newPeerClient(auth *authtoken.Holder, timeout time.Duration, scheme string, tc *tls.Config) *peerClient {
	hc := &http.Client{Timeout: timeout}
	if tc != nil {
		t := http.DefaultTransport.(*http.Transport).Clone()
		t.TLSClientConfig = tc.Clone()
		hc.Transport = t
	}
	if scheme == "" {
		scheme = "http"
	}
	return &peerClient{hc: hc, auth: auth, scheme: scheme}
}

// to returns a client for one call to addr (host:port, or a URL), with
// the token current now.
func (p *peerClient) to(addr string) (*client.Client, error) {
	return client.New(client.Config{Addrs: []string{client.BaseURLWithScheme(p.scheme, addr)}, Token: p.auth.Token(),
		HTTPClient: p.hc, Pinned: true})
}

// join asks the node at addr to admit a member (it forwards to the leader).
func (p *peerClient) join(ctx context.Context, addr string, req api.JoinRequest) error {
	c, err := p.to(addr)
	if err == nil {
		_, err = c.Join(ctx, req)
	}
	return err
}

// metadata publishes a member's addresses through the node at addr.
func (p *peerClient) metadata(ctx context.Context, addr string, meta fsm.NodeMeta) error {
	c, err := p.to(addr)
	if err == nil {
		_, err = c.SetMetadata(ctx, api.NodeMeta{ID: meta.ID, HTTPAddr: meta.HTTPAddr, ReplicaSync: meta.ReplicaSync,
			Incarnation: meta.Incarnation, CatalogRules: meta.CatalogRules})
	}
	return err
}

// status is the cluster as the node at addr sees it.
func (p *peerClient) status(ctx context.Context, addr string) (*api.ClusterStatus, error) {
	c, err := p.to(addr)
	if err != nil {
		return nil, err
	}
	return c.ClusterStatus(ctx)
}

// retryable reports whether a failed inter-node call may be tried again,
// judged by the API's error code as the Go client judges its own retries.
// A call that got no answer (network trouble), or whose answer proves that
// nothing was written (not_leader, no_leader, shutting_down), may be sent
// again like any request. After unknown_outcome the call may have taken
// effect; it is sent again only because both calls are idempotent: a join
// of a member already admitted, or metadata set to the same value again,
// changes nothing more. Every other answer is a verdict: bad_request and
// conflict, and internal too (a bug does not go away by asking again).
func retryable(err error) bool {
	var e *client.Error
	if errors.As(err, &e) {
		return e.Code.NothingWritten() || e.Code == api.CodeUnknownOutcome
	}
	return err != nil
}
