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
	httpd "github.com/kvselect/kvselect/http"
	"github.com/kvselect/kvselect/internal/authtoken"
	"github.com/kvselect/kvselect/internal/testlog"
	"github.com/kvselect/kvselect/scheduler/replica"
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
			Apply: func(string, *replica.Event) string { return "" }, Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(p.Close)
		if r := call(t, "POST", s.URL()+api.PathReplicaSyncRegister, fmt.Sprintf(`{"endpoint":%q}`, p.Endpoint()), authz...); r.status != http.StatusCreated {
			t.Fatalf("register peer %s: %d %s", id, r.status, r.body)
		}
		return p
	}
	admission := func(id string) replica.Event {
		return replica.Event{Kind: replica.KindAdmission, ReservationID: id, Model: "m", Tenant: "default", WorkerID: 1,
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
			for _, ps := range s.Sync().Peers() {
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
	metrics := call(t, "GET", s.URL()+api.PathMetrics, "", authz...).body
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

// Test_AuthRoles asks a real node, under both scopes, what each kind of
// caller may do: nothing but the open routes without a token (401); the
// Ray caller's routes with the selection token, and 403 forbidden on the
// others; everything with the admin token. Both lines of each token file
// are accepted. The steps run in order: the booking made with the
// selection token is the one its lifecycle calls then find.
func Test_AuthRoles(t *testing.T) {
	const (
		none  = ""
		wrong = "wrong"
		adm   = "adm-new"
		adm2  = "adm-old" // the admin file's second line
		sel   = "sel-new"
		sel2  = "sel-old"
	)
	leased := `{"worker_id": 2, "model_name": "leased", "endpoint": "http://w2", "block_size": 16,
		"kv_events_endpoint": "tcp://127.0.0.1:1", "lease_ttl_s": 3600}`
	reserve := func(id string) string {
		return fmt.Sprintf(`{"model_name": "m", "token_ids": [1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17], "reservation_id": %q}`, id)
	}
	type step struct {
		method, path, body string
		token              string
		want               int
	}
	for _, tt := range []struct {
		scope httpd.Scope
		steps []step
	}{
		{httpd.ScopeAll, []step{
			{"GET", api.PathHealth, "", none, 200},
			{"GET", api.PathReady, "", none, 200},
			{"GET", api.PathReadyz, "", none, 200},
			{"GET", api.PathOpenAPI, "", none, 200},
			{"POST", api.PathWorkers, workerJSON(3), none, 401},
			{"POST", api.PathWorkers, workerJSON(3), wrong, 401},
			{"POST", api.PathWorkers, workerJSON(3), sel, 403},
			{"POST", api.PathWorkers, workerJSON(3), adm2, 201},
			{"POST", api.PathSelect, selectBody, none, 401},
			{"POST", api.PathSelect, selectBody, wrong, 401},
			{"POST", api.PathSelect, selectBody, sel2, 200},
			{"POST", api.PathSelect, selectBody, adm, 200},
			{"POST", api.PathSelectAndReserve, reserve("r1"), none, 401},
			{"POST", api.PathSelectAndReserve, reserve("r1"), sel, 200},
			{"GET", api.PathReservations, "", none, 401},
			{"GET", api.PathReservations, "", sel, 200},
			{"GET", "/reservations/r1", "", sel2, 200},
			{"POST", "/reservations/r1/output_block", "", none, 401},
			{"POST", "/reservations/r1/output_block", "", sel, 200},
			{"POST", "/reservations/r1/prefill_complete", "", sel, 200},
			{"DELETE", "/reservations/r1", "", none, 401},
			{"DELETE", "/reservations/r1", "", sel, 200},
			{"GET", api.PathLoads, "", sel, 200},
			{"POST", api.PathPotentialLoads, selectBody, sel, 200},
			{"POST", api.PathOverlapScores, selectBody, sel, 200},
			{"POST", "/workers/2/keepalive", "", none, 401},
			{"POST", "/workers/2/keepalive", "", sel, 200},
			{"POST", api.PathKeepAlive, `{"worker_ids": [2]}`, sel2, 200},
			{"GET", api.PathWorkers, "", none, 401},
			{"GET", api.PathWorkers, "", sel, 200},
			{"GET", "/workers/2", "", sel, 200},
			{"PATCH", "/workers/3", `{"endpoint": "http://w3b"}`, sel, 403},
			{"PATCH", "/workers/3", `{"endpoint": "http://w3b"}`, adm, 200},
			{"DELETE", "/workers/3", "", sel, 403},
			{"GET", api.PathBusyThreshold, "", sel, 200},
			{"POST", api.PathBusyThreshold, `{"model": "m", "active_prefill_tokens_threshold": 100000}`, sel, 403},
			{"POST", api.PathBusyThreshold, `{"model": "m", "active_prefill_tokens_threshold": 100000}`, adm, 200},
			{"GET", api.PathClusterStatus, "", none, 401},
			{"GET", api.PathClusterStatus, "", sel, 200},
			{"POST", api.PathClusterStepDown, "", sel, 403},
			{"GET", api.PathMetrics, "", none, 401},
			{"GET", api.PathMetrics, "", sel, 200},
			{"GET", api.PathDump, "", none, 401},
			{"GET", api.PathDump, "", sel, 403},
			{"GET", api.PathDump, "", adm, 200},
			{"GET", api.PathReplicaSyncPeers, "", sel, 403},
			{"POST", api.PathReplicaSyncRegister, `{"endpoint": "tcp://127.0.0.1:1"}`, sel, 403},
		}},
		{httpd.ScopeAdmin, []step{
			{"GET", api.PathReady, "", none, 200},
			{"POST", api.PathWorkers, workerJSON(3), none, 401},
			{"POST", api.PathWorkers, workerJSON(3), sel, 403},
			{"POST", api.PathWorkers, workerJSON(3), adm, 201},
			{"POST", api.PathSelect, selectBody, none, 200},
			{"POST", api.PathSelectAndReserve, reserve("r1"), none, 200},
			{"GET", api.PathReservations, "", none, 200},
			{"POST", "/reservations/r1/output_block", "", none, 200},
			{"DELETE", "/reservations/r1", "", none, 200},
			{"GET", api.PathLoads, "", none, 200},
			{"GET", api.PathWorkers, "", none, 200},
			{"GET", api.PathClusterStatus, "", none, 200},
			{"GET", api.PathMetrics, "", none, 200},
			{"POST", "/workers/2/keepalive", "", none, 401},
			{"POST", "/workers/2/keepalive", "", sel2, 200},
			{"POST", "/workers/2/keepalive", "", adm, 200},
			{"PATCH", "/workers/3", `{"endpoint": "http://w3b"}`, none, 401},
			{"POST", api.PathBusyThreshold, `{"model": "m", "active_prefill_tokens_threshold": 100000}`, none, 401},
			{"POST", api.PathBusyThreshold, `{"model": "m", "active_prefill_tokens_threshold": 100000}`, sel, 403},
			{"GET", api.PathDump, "", none, 401},
			{"GET", api.PathDump, "", sel, 403},
			{"GET", api.PathDump, "", adm2, 200},
			{"POST", api.PathClusterStepDown, "", none, 401},
			{"POST", api.PathReplicaSyncRegister, `{"endpoint": "tcp://127.0.0.1:1"}`, none, 401},
		}},
	} {
		t.Run("scope "+string(tt.scope), func(t *testing.T) {
			cfg := servertest.Config("n1", t.TempDir())
			cfg.AuthToken, cfg.AuthTokenAlso, cfg.AuthScope = adm, adm2, tt.scope
			cfg.SelectionToken, cfg.SelectionTokenAlso = sel, sel2
			s := servertest.MustStart(t, cfg)
			for _, body := range []string{workerJSON(1), leased} {
				if r := call(t, "POST", s.URL()+api.PathWorkers, body, "Authorization", "Bearer "+adm); r.status != http.StatusCreated {
					t.Fatalf("register: %d %s", r.status, r.body)
				}
			}
			servertest.Eventually(t, "the node is ready", func() error {
				if status, body := get(t, s.URL()+api.PathReadyz); status != http.StatusOK {
					return fmt.Errorf("%d %s", status, body)
				}
				return nil
			})
			for _, st := range tt.steps {
				var hdr []string
				if st.token != "" {
					hdr = []string{"Authorization", "Bearer " + st.token}
				}
				r := call(t, st.method, s.URL()+st.path, st.body, hdr...)
				if r.status != st.want {
					t.Fatalf("%s %s with token %q: %d %s, want %d", st.method, st.path, st.token, r.status, r.body, st.want)
				}
				switch r.status {
				case http.StatusUnauthorized:
					if r.code() != string(api.CodeUnauthorized) || r.header.Get("WWW-Authenticate") != `Bearer realm="kvselect"` {
						t.Fatalf("%s %s: 401 with code %q, WWW-Authenticate %q", st.method, st.path, r.code(), r.header.Get("WWW-Authenticate"))
					}
				case http.StatusForbidden:
					if r.code() != string(api.CodeForbidden) || !strings.Contains(r.header.Get("WWW-Authenticate"), "insufficient_scope") {
						t.Fatalf("%s %s: 403 with code %q, WWW-Authenticate %q", st.method, st.path, r.code(), r.header.Get("WWW-Authenticate"))
					}
				}
			}
		})
	}
}

// Test_AuthConfigRefused: token configurations a node refuses to start
// with.
func Test_AuthConfigRefused(t *testing.T) {
	for _, tt := range []struct {
		name   string
		mutate func(*server.Config)
		want   error
	}{
		{"selection token without an admin token", func(c *server.Config) { c.SelectionToken = "sel" }, server.ErrSelectionWithoutAdmin},
		{"selection token equal to the admin token", func(c *server.Config) { c.AuthToken, c.SelectionToken = "same", "same" }, server.ErrSameToken},
		{"selection token equal to the admin file's second line", func(c *server.Config) {
			c.AuthToken, c.AuthTokenAlso, c.SelectionToken, c.SelectionTokenAlso = "adm", "adm-old", "sel", "adm-old"
		}, server.ErrSameToken},
		{"a token not for a header", func(c *server.Config) { c.AuthToken = "two words" }, authtoken.ErrInvalid},
		{"a second line without a first", func(c *server.Config) { c.AuthTokenAlso = "x" }, authtoken.ErrInvalid},
		{"an unknown scope", func(c *server.Config) { c.AuthToken, c.AuthScope = "adm", "everything" }, nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cfg := servertest.Config("n1", t.TempDir())
			tt.mutate(&cfg)
			s, err := server.Start(cfg)
			if err == nil {
				_ = s.Close(context.Background())
				t.Fatal("started")
			}
			if tt.want != nil && !errors.Is(err, tt.want) {
				t.Fatalf("err = %v, want %v", err, tt.want)
			}
		})
	}
}

// Test_StartLogSaysAuth: a node without a token says at start, as a
// warning, that it runs unauthenticated; a node with one says what its
// token guards and does not warn.
func Test_StartLogSaysAuth(t *testing.T) {
	for _, tt := range []struct {
		name   string
		mutate func(*server.Config)
		want   []string
		absent string
	}{
		{"no token", func(*server.Config) {}, []string{"level=WARN msg=\"running without authentication", "the Raft port takes catalog writes from anyone",
			"authenticated=false"}, ""},
		{"tokens", func(c *server.Config) { c.AuthToken, c.SelectionToken = "adm", "sel" },
			[]string{"authenticated=true auth_scope=all selection_token=true"}, "running without authentication"},
		{"scope admin", func(c *server.Config) { c.AuthToken, c.AuthScope = "adm", httpd.ScopeAdmin },
			[]string{"authenticated=true auth_scope=admin selection_token=false"}, "running without authentication"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var logs testlog.Buffer
			cfg := servertest.Config("n1", t.TempDir())
			cfg.Logger = logs.Logger(slog.LevelInfo)
			tt.mutate(&cfg)
			servertest.MustStart(t, cfg)
			out := logs.String()
			for _, w := range tt.want {
				if !strings.Contains(out, w) {
					t.Errorf("the start log does not say %q:\n%s", w, out)
				}
			}
			if tt.absent != "" && strings.Contains(out, tt.absent) {
				t.Errorf("the start log says %q:\n%s", tt.absent, out)
			}
		})
	}
}

// Test_ReloadAppliesEachGoodFile: each token file stands on its own at a
// reload, so a bad admin file cannot hold back the revocation of a leaked
// selection token, nor a bad selection file the rotation of the admin
// token; the failure is reported all the same.
func Test_ReloadAppliesEachGoodFile(t *testing.T) {
	for _, tt := range []struct {
		name                   string
		admin, selection       string
		adminMode              os.FileMode
		wantAdmin, wantRefused string // tokens after the reload: accepted, refused
		wantSelection, selGone string
	}{
		{name: "bad admin file, selection revoked", admin: "adm-1", adminMode: 0o666, selection: "sel-2",
			wantAdmin: "adm-1", wantSelection: "sel-2", selGone: "sel-1"},
		{name: "bad selection file, admin rotated", admin: "adm-2", adminMode: 0o600, selection: "a\nb\nc",
			wantAdmin: "adm-2", wantRefused: "adm-1", wantSelection: "sel-1"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			adminPath, selPath := filepath.Join(dir, "admin"), filepath.Join(dir, "selection")
			writeToken(t, adminPath, "adm-1\n", 0o600)
			writeToken(t, selPath, "sel-1\n", 0o600)
			cfg := servertest.Config("n1", t.TempDir())
			cfg.AuthToken, cfg.AuthTokenFile = "adm-1", adminPath
			cfg.SelectionToken, cfg.SelectionTokenFile = "sel-1", selPath
			s := servertest.MustStart(t, cfg)
			status := func(path, token string) int {
				t.Helper()
				return call(t, "GET", s.URL()+path, "", "Authorization", "Bearer "+token).status
			}
			writeToken(t, adminPath, tt.admin+"\n", tt.adminMode)
			writeToken(t, selPath, tt.selection+"\n", 0o600)
			if err := s.ReloadAuthToken(); err == nil {
				t.Fatal("a reload with a bad file reports no error")
			}
			if got := status("/dump", tt.wantAdmin); got != http.StatusOK {
				t.Errorf("admin token %s after the reload: %d", tt.wantAdmin, got)
			}
			if tt.wantRefused != "" {
				if got := status("/dump", tt.wantRefused); got != http.StatusUnauthorized {
					t.Errorf("replaced admin token %s after the reload: %d", tt.wantRefused, got)
				}
			}
			if got := status("/loads", tt.wantSelection); got != http.StatusOK {
				t.Errorf("selection token %s after the reload: %d", tt.wantSelection, got)
			}
			if tt.selGone != "" {
				if got := status("/loads", tt.selGone); got != http.StatusUnauthorized {
					t.Errorf("revoked selection token %s after the reload: %d", tt.selGone, got)
				}
			}
		})
	}
}
