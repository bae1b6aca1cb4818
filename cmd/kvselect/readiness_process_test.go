package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/kvselect/kvselect/api"
)

// Test_SelectionReadinessWithoutQuorum runs three real kvselect processes
// and follows GET /readyz?for=selection, the pod readiness probe (SPEC
// §3.2, §7), through what a Kubernetes cluster does to them:
//
//   - two nodes are killed: the survivor's /readyz turns 503 no_leader,
//     while /readyz?for=selection stays 200 and /select answers;
//   - one comes back while its index recovery is still reading a peer's
//     dump: 503 recovering, though it has caught up; 200 once the dump
//     is read;
//   - the survivor, restarted alone, has never caught up since it
//     started: 503 with the reason.
func Test_SelectionReadinessWithoutQuorum(t *testing.T) {
	c := startFastFailover(t, "info")
	leader := c.waitAgreement(30 * time.Second)
	mustRegister(t, c, 1)
	for _, node := range c.nodes {
		c.eventually(node.id+" is selection-ready with the worker", 30*time.Second, func() error {
			if r, err := probeReadyz(node, true); err != nil || r.status != http.StatusOK {
				return fmt.Errorf("%+v %v", r, err)
			}
			ids, err := localWorkerIDs(node)
			if err != nil || len(ids) != 1 {
				return fmt.Errorf("workers %v %v", ids, err)
			}
			return nil
		})
	}

	// The survivor is a follower: the leader and the other follower go.
	var survivor, back *procNode
	for _, node := range c.nodes {
		if node != leader && survivor == nil {
			survivor = node
		} else if node != leader {
			back = node
		}
	}
	c.kill(leader)
	c.kill(back)
	c.eventually(survivor.id+"'s /readyz turns 503 no_leader", 30*time.Second, func() error {
		r, err := probeReadyz(survivor, false)
		if err != nil {
			return err
		}
		if r.status != http.StatusServiceUnavailable || r.body.Reason != api.ReadyzNoLeader {
			return fmt.Errorf("/readyz = %d %+v", r.status, r.body)
		}
		return nil
	})
	for range 3 {
		mustSelectionReady(t, survivor, true)
		a, err := send(context.Background(), pollClient, http.MethodPost, survivor.url(api.PathSelect), selectJSON)
		if err != nil || a.status != http.StatusOK {
			t.Fatalf("select on %s without quorum: %v %v", survivor.id, a, err)
		}
	}

	// back returns, and recovers its index from a peer whose dump is
	// still streaming: it has caught up with the leader the two elect,
	// but is not selection-ready until the dump is read.
	peer := startSlowDumpPeer(t)
	back.Opts.Extra = append(slices.Clip(back.Opts.Extra), "--indexer-peers="+peer.url())
	c.start(back)
	c.eventually(back.id+" has caught up and is recovering", 60*time.Second, func() error {
		r, err := probeReadyz(back, true)
		if err != nil {
			return err
		}
		if r.status != http.StatusServiceUnavailable || r.body.Reason != api.ReadyzRecovering || !r.body.CaughtUp || !r.body.Recovering {
			return fmt.Errorf("/readyz?for=selection = %d %+v", r.status, r.body)
		}
		return nil
	})
	peer.finish()
	c.eventually(back.id+" is selection-ready once the dump is read", 30*time.Second, func() error {
		r, err := probeReadyz(back, true)
		if err != nil {
			return err
		}
		if r.status != http.StatusOK || r.body.Recovering {
			return fmt.Errorf("/readyz?for=selection = %d %+v", r.status, r.body)
		}
		return nil
	})

	// The survivor, restarted alone, has its log but no leader to catch up
	// with in this process's life.
	c.kill(back)
	c.kill(survivor)
	c.start(survivor)
	c.eventually(survivor.id+" serves HTTP again", 30*time.Second, func() error {
		_, err := probeReadyz(survivor, true)
		return err
	})
	for range 3 {
		r, err := probeReadyz(survivor, true)
		if err != nil {
			t.Fatal(err)
		}
		if r.status != http.StatusServiceUnavailable || r.body.CaughtUp || r.body.Code != api.CodeNotReady ||
			(r.body.Reason != api.ReadyzNoLeader && r.body.Reason != api.ReadyzNoCommitIndex) {
			t.Fatalf("%s restarted alone: /readyz?for=selection = %d %+v, want 503 no_leader, not caught up", survivor.id, r.status, r.body)
		}
	}
	c.terminateAll(15 * time.Second)
}

// readyzAnswer is one answer of GET /readyz.
type readyzAnswer struct {
	status int
	body   api.Readyz
}

// probeReadyz asks node's /readyz as a probe does (no token), for
// selection or for writes.
func probeReadyz(node *procNode, forSelection bool) (readyzAnswer, error) {
	path := api.PathReadyz
	if forSelection {
		path += "?" + api.QueryFor + "=" + api.ReadyzForSelection
	}
	a, err := send(context.Background(), node.pollClient(), http.MethodGet, node.url(path), "")
	if err != nil {
		return readyzAnswer{}, fmt.Errorf("%s: %w", node.id, err)
	}
	var body api.Readyz
	if err := json.Unmarshal(a.body, &body); err != nil {
		return readyzAnswer{}, fmt.Errorf("GET %s on %s: %v: %w", path, node.id, a, err)
	}
	return readyzAnswer{a.status, body}, nil
}

// mustSelectionReady checks that node answers GET and HEAD
// /readyz?for=selection with 200, and that it has no leader when
// leaderless.
func mustSelectionReady(t *testing.T, node *procNode, leaderless bool) {
	t.Helper()
	r, err := probeReadyz(node, true)
	if err != nil {
		t.Fatal(err)
	}
	if r.status != http.StatusOK || !r.body.Ready || !r.body.CaughtUp || (leaderless && r.body.Leader != "") {
		t.Fatalf("%s: /readyz?for=selection = %d %+v, want 200 (leaderless %v)", node.id, r.status, r.body, leaderless)
	}
	a, err := send(context.Background(), node.pollClient(), http.MethodHead, node.url(api.PathReadyz+"?for=selection"), "")
	if err != nil || a.status != http.StatusOK {
		t.Fatalf("%s: HEAD /readyz?for=selection = %v %v, want 200", node.id, a, err)
	}
}

// slowDumpPeer is an --indexer-peers server whose GET /dump answers at
// once and then streams an empty dump slowly, a space a second, until
// finish: a node recovering from it stays recovering exactly that long,
// without tripping its stall timeout.
type slowDumpPeer struct {
	srv     *httptest.Server
	done    chan struct{}
	closing sync.Once
}

func startSlowDumpPeer(t *testing.T) *slowDumpPeer {
	t.Helper()
	p := &slowDumpPeer{done: make(chan struct{})}
	p.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != api.PathDump {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusOK)
		flush := func(s string) {
			_, _ = io.WriteString(w, s)
			w.(http.Flusher).Flush()
		}
		flush("{")
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		for {
			select {
			case <-p.done:
				flush("}")
				return
			case <-r.Context().Done():
				return
			case <-tick.C:
				flush(" ")
			}
		}
	}))
	t.Cleanup(func() {
		p.finish()
		p.srv.Close()
	})
	return p
}

func (p *slowDumpPeer) url() string { return p.srv.URL }

// finish ends every dump being streamed, and answers later ones whole.
func (p *slowDumpPeer) finish() { p.closing.Do(func() { close(p.done) }) }
