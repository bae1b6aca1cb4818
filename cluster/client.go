package cluster

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/kvselect/kvselect/api"
	"github.com/kvselect/kvselect/client"
	"github.com/kvselect/kvselect/fsm"
)

// peerClient makes the node's own calls to other nodes (join, metadata)
// with the Go client, pinned to the address it is given: the node routes
// these calls itself (through --peer-dial overrides), so the client must
// neither follow the leader elsewhere nor retry on its own. Client
// requests that a follower forwards go through the http package, which
// proxies them as they came.
type peerClient struct {
	hc    *http.Client
	token string
}

func newPeerClient(token string, timeout time.Duration) *peerClient {
	return &peerClient{hc: &http.Client{Timeout: timeout}, token: token}
}

func (p *peerClient) to(addr string) (*client.Client, error) {
	return client.New(client.Config{Addrs: []string{addr}, Token: p.token, HTTPClient: p.hc, Pinned: true})
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
		_, err = c.SetMetadata(ctx, api.NodeMeta{ID: meta.ID, HTTPAddr: meta.HTTPAddr, ReplicaSync: meta.ReplicaSync})
	}
	return err
}

// retryable reports whether a failed inter-node call may be tried again:
// nothing was decided (no leader, not the leader, network trouble, the
// other node shutting down). Verdicts (4xx) are final.
func retryable(err error) bool {
	var e *client.Error
	if errors.As(err, &e) {
		return e.Status >= 500
	}
	return err != nil
}
