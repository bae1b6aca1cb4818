package server_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kvselect/kvselect/api"
	"github.com/kvselect/kvselect/client"
	"github.com/kvselect/kvselect/internal/authtoken"
	"github.com/kvselect/kvselect/server"
	"github.com/kvselect/kvselect/server/servertest"
	"github.com/kvselect/kvselect/zmqsync"
)

// writeToken writes a token file with the mode given (past the umask).
func writeToken(t *testing.T, path, content string, mode os.FileMode) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, mode); err != nil {
		t.Fatal(err)
	}
}

// Test_AuthTokenReload is what SIGHUP does (cmd/kvselect calls
// ReloadAuthToken): the file is read again and, from the next request on,
// the old token is refused and the new one accepted. A file that fails
// the checks keeps the current token.
func Test_AuthTokenReload(t *testing.T) {
	path := filepath.Join(t.TempDir(), "token")
	writeToken(t, path, "old-token\n", 0o600)
	cfg := servertest.Config("n1", t.TempDir())
	cfg.AuthToken, cfg.AuthTokenFile = "old-token", path
	s := servertest.MustStart(t, cfg)
	write := func(id int, token string) int {
		t.Helper()
		return call(t, "POST", s.URL()+"/workers", workerJSON(id), "Authorization", "Bearer "+token).status
	}
	if got := write(1, "old-token"); got != http.StatusCreated {
		t.Fatalf("with the token at start: %d", got)
	}

	writeToken(t, path, "new-token\n", 0o600)
	if err := s.ReloadAuthToken(); err != nil {
		t.Fatal(err)
	}
	if got := write(2, "old-token"); got != http.StatusUnauthorized {
		t.Fatalf("old token after the reload: %d", got)
	}
	if got := write(2, "new-token"); got != http.StatusCreated {
		t.Fatalf("new token after the reload: %d", got)
	}

	for _, bad := range []struct {
		name, content string
		mode          os.FileMode
		problem       string
	}{
		{"empty", "\n", 0o600, "is empty"},
		{"world-writable", "third-token", 0o666, "world-writable"},
		{"not for a header", "third token", 0o600, "cannot go in an HTTP header"},
	} {
		writeToken(t, path, bad.content, bad.mode)
		if err := s.ReloadAuthToken(); err == nil || !strings.Contains(err.Error(), bad.problem) || !strings.Contains(err.Error(), path) {
			t.Fatalf("reload of a %s file: %v", bad.name, err)
		}
		if got := write(3, "new-token"); got != http.StatusCreated {
			t.Fatalf("after the failed reload of a %s file the current token is refused: %d", bad.name, got)
		}
	}
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	if err := s.ReloadAuthToken(); err == nil || !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("reload of a missing file: %v", err)
	}
	if err := s.SetAuthToken("bad token"); err == nil {
		t.Fatal("SetAuthToken accepted a token with a space")
	}
	if got := write(4, "new-token"); got != http.StatusCreated {
		t.Fatalf("after failed changes the current token is refused: %d", got)
	}
}

// A node started without a token file has nothing to reload; it keeps
// running unauthenticated.
func Test_AuthTokenReloadWithoutFile(t *testing.T) {
	s := servertest.MustStart(t, servertest.Config("n1", t.TempDir()))
	if err := s.ReloadAuthToken(); !errors.Is(err, server.ErrNoTokenFile) {
		t.Fatalf("reload without a file: %v", err)
	}
	if r := call(t, "POST", s.URL()+"/workers", workerJSON(1)); r.status != http.StatusCreated {
		t.Fatalf("unauthenticated write: %d %s", r.status, r.body)
	}
}

// Test_ReplicaSyncAuthenticated: on a node with a token, a replica-sync
// peer without it (here registered, as an operator's mistake or a
// stranger's endpoint would be) cannot change the node's load: its
// admission is dropped and counted as unauthenticated. The same admission
// from a peer with the token books the load.
func Test_ReplicaSyncAuthenticated(t *testing.T) {
	cfg := servertest.Config("n1", t.TempDir())
	cfg.AuthToken = "s3cret"
	cfg.ReplicaSync = &server.ReplicaSyncConfig{Listen: "tcp://127.0.0.1:0"}
	s := servertest.MustStart(t, cfg)
	authz := []string{"Authorization", "Bearer s3cret"}
	if r := call(t, "POST", s.URL()+"/workers", workerJSON(1), authz...); r.status != http.StatusCreated {
		t.Fatalf("register a worker: %d %s", r.status, r.body)
	}
	peer := func(id, token string) *zmqsync.Syncer {
		p, err := zmqsync.Start(zmqsync.Config{NodeID: id, Listen: "tcp://127.0.0.1:0", Auth: authtoken.NewHolder(token),
			Apply: func(string, *zmqsync.Event) string { return "" }, Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(p.Close)
		if r := call(t, "POST", s.URL()+api.PathReplicaSyncRegister, fmt.Sprintf(`{"endpoint":%q}`, p.Endpoint()), authz...); r.status != http.StatusCreated {
			t.Fatalf("register peer %s: %d %s", id, r.status, r.body)
		}
		return p
	}
	admission := func(id string) zmqsync.Event {
		return zmqsync.Event{Kind: zmqsync.KindAdmission, ReservationID: id, Model: "m", Tenant: "default", WorkerID: 1,
			BlockSize: 16, SequenceHashes: []uint64{1, 2}, ISL: 32, PrefillTokens: 32, Admitted: time.Now()}
	}
	cl, err := client.New(client.Config{Addrs: []string{s.URL()}, Token: "s3cret"})
	if err != nil {
		t.Fatal(err)
	}
	activeRequests := func() int {
		loads, err := cl.Loads(context.Background(), "m", "")
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, pl := range loads {
			for _, l := range pl.Loads {
				n += int(l.ActiveRequests)
			}
		}
		return n
	}

	for _, stranger := range []struct{ id, token string }{{"tokenless", ""}, {"guesser", "guess"}} {
		p := peer(stranger.id, stranger.token)
		servertest.Eventually(t, stranger.id+"'s admissions are dropped as unauthenticated", func() error {
			p.Publish(admission("forged-" + stranger.id))
			for _, ps := range s.Sync.Peers() {
				if ps.Endpoint == p.Endpoint() && ps.Messages > 0 {
					return nil
				}
			}
			return errors.New("nothing arrived yet")
		})
		if n := activeRequests(); n != 0 {
			t.Fatalf("%s changed the load: %d active requests", stranger.id, n)
		}
		if _, err := s.Scheduler.Reservation("forged-" + stranger.id); err == nil {
			t.Fatalf("%s's reservation was booked", stranger.id)
		}
	}
	_, metrics := get(t, s.URL()+api.PathMetrics)
	if !strings.Contains(metrics, `kvselect_replica_sync_dropped_messages_total{reason="unauthenticated"}`) ||
		strings.Contains(metrics, `kvselect_replica_sync_dropped_messages_total{reason="unauthenticated"} 0`) {
		t.Fatal("no unauthenticated drop counted in /metrics")
	}

	friend := fakeMember(t, s, "friend", "s3cret", func(endpoint string) {
		if r := call(t, "POST", s.URL()+api.PathReplicaSyncRegister, fmt.Sprintf(`{"endpoint":%q}`, endpoint), authz...); r.status != http.StatusCreated {
			t.Fatalf("register peer friend: %d %s", r.status, r.body)
		}
	})
	servertest.Eventually(t, "the admission of a peer with the token books the load", func() error {
		friend.Publish(admission(fmt.Sprint("friend-", time.Now().UnixNano())))
		if n := activeRequests(); n == 0 {
			return errors.New("no load yet")
		}
		return nil
	})
}
