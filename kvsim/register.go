package kvsim

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/kvselect/kvselect/client"
)

// httpTimeout bounds every HTTP call the simulator makes to kvselect.
const httpTimeout = 30 * time.Second

// newClient returns a kvselect client for kvselectURL with the Sim's
// token.
func (s *Sim) newClient(kvselectURL string) (*client.Client, error) {
	return client.New(client.Config{Addrs: []string{kvselectURL}, Token: s.cfg.AuthToken,
		HTTPClient: &http.Client{Timeout: httpTimeout}})
}

// Register registers every worker with the kvselect node at kvselectURL
// (POST /workers), stopping at the first failure. The client follows the
// leader and retries while the cluster has none; a rejection is returned
// as a *client.Error.
func (s *Sim) Register(ctx context.Context, kvselectURL string) error {
	c, err := s.newClient(kvselectURL)
	if err != nil {
		return fmt.Errorf("kvsim: %w", err)
	}
	for _, w := range s.workers {
		if _, err := c.RegisterWorker(ctx, w.Registration()); err != nil {
			return fmt.Errorf("kvsim: register worker %d: %w", w.id, err)
		}
	}
	return nil
}
