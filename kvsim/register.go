package kvsim

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/kvselect/kvselect/api"
	"github.com/kvselect/kvselect/client"
)

// httpTimeout bounds every HTTP call the simulator makes to kvselect.
const httpTimeout = 30 * time.Second

// newClient returns a kvselect client for kvselectURL with the Sim's
// token.
func (s *Sim) newClient(kvselectURL ...string) (*client.Client, error) {
	return client.New(client.Config{Addrs: kvselectURL, Token: s.cfg.AuthToken, CAFile: s.cfg.CAFile,
		HTTPClient: &http.Client{Timeout: httpTimeout}})
}

// clusterClient is a client of kvselectURL and every member of its
// cluster (their HTTP addresses, from /cluster/status, in kvselectURL's
// scheme: a cluster serves one), so that renewals go on when the node
// kvsim registered through stops. When the status cannot be read, the
// client knows kvselectURL alone.
func (s *Sim) clusterClient(ctx context.Context, kvselectURL string) (*client.Client, error) {
	c, err := s.newClient(kvselectURL)
	if err != nil {
		return nil, err
	}
	st, err := c.ClusterStatus(ctx)
	if err != nil {
		s.cfg.Log.Warn("could not list the cluster's members; renewing leases through one node", "url", kvselectURL, "err", err)
		return c, nil
	}
	scheme, _, _ := strings.Cut(client.BaseURL(kvselectURL), "://")
	addrs := []string{kvselectURL}
	for _, m := range st.Members {
		if m.HTTPAddr != "" && !strings.Contains(kvselectURL, "//"+m.HTTPAddr) {
			addrs = append(addrs, client.BaseURLWithScheme(scheme, m.HTTPAddr))
		}
	}
	return s.newClient(addrs...)
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

// KeepLeases renews every worker's lease with the kvselect cluster at
// kvselectURL (through any member: it learns them all at the start), in
// one request per round (POST /workers/keepalive), a
// third of the TTL apart, until ctx ends. A worker the cluster no longer
// knows (its lease lapsed while kvselect was unreachable, or someone
// deleted it) is registered again, as a real worker process would. A round
// that fails is logged and the next one tries again. Without a lease
// (Config.LeaseTTL 0) it returns at once.
func (s *Sim) KeepLeases(ctx context.Context, kvselectURL string) error {
	if s.cfg.LeaseTTL == 0 {
		return nil
	}
	c, err := s.clusterClient(ctx, kvselectURL)
	if err != nil {
		return fmt.Errorf("kvsim: %w", err)
	}
	ids := make([]uint64, len(s.workers))
	byID := make(map[uint64]*Worker, len(s.workers))
	for i, w := range s.workers {
		ids[i], byID[w.id] = w.id, w
	}
	tick := time.NewTicker(s.cfg.LeaseTTL / 3)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
		rctx, cancel := context.WithTimeout(ctx, s.cfg.LeaseTTL/3)
		s.renew(rctx, c, ids, byID)
		cancel()
	}
}

// renew runs one keepalive round.
func (s *Sim) renew(ctx context.Context, c *client.Client, ids []uint64, byID map[uint64]*Worker) {
	ans, err := c.KeepAliveMany(ctx, ids)
	if err != nil {
		if ctx.Err() == nil || !errors.Is(err, context.DeadlineExceeded) {
			s.cfg.Log.Warn("lease keepalive failed; retrying next round", "workers", len(ids), "err", err)
		}
		return
	}
	for _, f := range ans.Failed {
		w := byID[f.WorkerID]
		if f.Code != string(api.CodeNotFound) || w == nil {
			s.cfg.Log.Warn("lease keepalive refused", "worker_id", f.WorkerID, "code", f.Code, "err", f.Error)
			continue
		}
		if _, err := c.RegisterWorker(ctx, w.Registration()); err != nil {
			s.cfg.Log.Warn("re-registering a worker whose lease lapsed failed", "worker_id", f.WorkerID, "err", err)
			continue
		}
		s.cfg.Log.Info("worker's lease had lapsed; registered it again", "worker_id", f.WorkerID)
	}
}
