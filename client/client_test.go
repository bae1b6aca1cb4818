package client

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/kvselect/kvselect/api"
	"github.com/kvselect/kvselect/internal/fakenode"
)

func mustClient(t *testing.T, cfg Config) *Client {
	t.Helper()
	c, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func ctxFor(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// Test_WriteRouting checks where a catalog write lands, given which nodes
// are up and what they answer.
func Test_WriteRouting(t *testing.T) {
	spec := api.WorkerSpec{WorkerID: 7, Endpoint: "http://w7:8000", BlockSize: 16}
	const wantBody = `{"worker_id":7,"endpoint":"http://w7:8000","block_size":16}`
	tests := []struct {
		name string
		// setup wires nodes a and b and returns Config.Addrs.
		setup func(t *testing.T, a, b *fakenode.Node) []string
		// tries is how many times each node gets the write.
		triesA, triesB int
		servedBy       string
	}{
		{
			name: "the home node takes it (it forwards to the leader itself)",
			setup: func(t *testing.T, a, b *fakenode.Node) []string {
				a.Answer("POST /workers", http.StatusCreated, storedWorker, api.HeaderIndex, "12", api.HeaderServedBy, "c")
				return []string{a.URL, b.URL}
			},
			triesA: 1, servedBy: "c",
		},
		{
			name: "home knows no leader: the client finds it and writes there",
			setup: func(t *testing.T, a, b *fakenode.Node) []string {
				a.Answer("POST /workers", http.StatusServiceUnavailable, api.Error{Message: "no leader", Code: api.CodeNoLeader})
				a.Status("a", api.StateFollower, "b", b.Host())
				b.Answer("POST /workers", http.StatusCreated, storedWorker, api.HeaderIndex, "12", api.HeaderServedBy, "b")
				return []string{a.URL}
			},
			triesA: 1, triesB: 1, servedBy: "b",
		},
		{
			name: "home unreachable: the next address takes it",
			setup: func(t *testing.T, a, b *fakenode.Node) []string {
				b.Answer("POST /workers", http.StatusCreated, storedWorker, api.HeaderIndex, "12", api.HeaderServedBy, "b")
				return []string{fakenode.DeadAddr(t), b.URL}
			},
			triesB: 1, servedBy: "b",
		},
		{
			name: "the leader's address cannot be dialled: back through home, which now forwards",
			setup: func(t *testing.T, a, b *fakenode.Node) []string {
				a.Answers("POST /workers", fakenode.Error(api.CodeNotLeader, "leader is c"),
					fakenode.OK(http.StatusCreated, storedWorker, api.HeaderIndex, "12", api.HeaderServedBy, "c"))
				a.Status("a", api.StateFollower, "c", fakenode.DeadAddr(t))
				return []string{a.URL}
			},
			triesA: 2, servedBy: "c",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, b := fakenode.New(t), fakenode.New(t)
			c := mustClient(t, Config{Addrs: tt.setup(t, a, b), Token: "s3cret"})
			var info ResponseInfo
			w, err := c.RegisterWorker(WithResponseInfo(ctxFor(t), &info), spec)
			if err != nil {
				t.Fatal(err)
			}
			if w.WorkerID != 7 || w.CatalogIndex != 12 || info.ServedBy != tt.servedBy || info.CatalogIndex != 12 {
				t.Fatalf("answer %+v, info %+v", w, info)
			}
			for name, n := range map[string]*fakenode.Node{"a": a, "b": b} {
				want := map[string]int{"a": tt.triesA, "b": tt.triesB}[name]
				got := n.Requests("POST /workers")
				if len(got) != want {
					t.Fatalf("node %s got the write %d times, want %d", name, len(got), want)
				}
				for _, g := range got {
					if g.Body != wantBody || g.Auth != "Bearer s3cret" {
						t.Fatalf("node %s got %+v", name, g)
					}
				}
			}
			if c.CatalogIndex() != 12 {
				t.Fatalf("session index %d, want 12", c.CatalogIndex())
			}
		})
	}
}

// Test_Retries checks which answers a call is sent again after: only those
// that prove nothing happened, and for idempotent catalog writes an
// unknown outcome.
func Test_Retries(t *testing.T) {
	deleted := fakenode.OK(http.StatusOK, storedWorker)
	tests := []struct {
		name      string
		route     string
		seq       []http.HandlerFunc
		call      func(ctx context.Context, c *Client) error
		retryFor  time.Duration
		wantTries int
		wantCode  api.Code // "" for success
		wantAfter bool     // Error.AfterUnknownOutcome
	}{
		{"not_leader, then success", "DELETE /workers/7",
			[]http.HandlerFunc{fakenode.Error(api.CodeNotLeader, "x"), deleted},
			deleteWorker7, 0, 2, "", false},
		{"no_leader twice, then success", "DELETE /workers/7",
			[]http.HandlerFunc{fakenode.Error(api.CodeNoLeader, "x"), fakenode.Error(api.CodeNoLeader, "x"), deleted},
			deleteWorker7, 0, 3, "", false},
		{"unknown outcome of an idempotent write: sent again", "DELETE /workers/7",
			[]http.HandlerFunc{fakenode.Error(api.CodeUnknownOutcome, "leader lost"), deleted},
			deleteWorker7, 0, 2, "", false},
		{"unknown outcome, then gone: reported as such", "DELETE /workers/7",
			[]http.HandlerFunc{fakenode.Error(api.CodeUnknownOutcome, "leader lost"), fakenode.Error(api.CodeNotFound, "worker not found: 7")},
			deleteWorker7, 0, 2, api.CodeNotFound, true},
		{"lost answer of an idempotent write: sent again", "DELETE /workers/7",
			[]http.HandlerFunc{fakenode.HangUp, deleted},
			deleteWorker7, 0, 2, "", false},
		{"a verdict is final", "DELETE /workers/7",
			[]http.HandlerFunc{fakenode.Error(api.CodeConflict, "no")},
			deleteWorker7, 0, 1, api.CodeConflict, false},
		{"gives up after RetryTimeout", "DELETE /workers/7",
			[]http.HandlerFunc{fakenode.Error(api.CodeNotLeader, "x")},
			deleteWorker7, 200 * time.Millisecond, 0, api.CodeNotLeader, false},
		{"step down: an unknown outcome is not retried", "POST /cluster/stepdown",
			[]http.HandlerFunc{fakenode.Error(api.CodeUnknownOutcome, "x"), fakenode.OK(http.StatusOK, api.ClusterStatus{})},
			func(ctx context.Context, c *Client) error { _, err := c.StepDown(ctx); return err }, 0, 1, api.CodeUnknownOutcome, false},
		{"step down: a lost answer is not retried", "POST /cluster/stepdown",
			[]http.HandlerFunc{fakenode.HangUp, fakenode.OK(http.StatusOK, api.ClusterStatus{})},
			func(ctx context.Context, c *Client) error { _, err := c.StepDown(ctx); return err }, 0, 1, "", false},
		{"a booking whose answer was lost is not sent again", "POST /select_and_reserve",
			[]http.HandlerFunc{fakenode.HangUp, fakenode.OK(http.StatusOK, api.Selection{})},
			func(ctx context.Context, c *Client) error {
				_, err := c.SelectAndReserve(ctx, api.SelectRequest{ReservationID: "r1"})
				return err
			}, 0, 1, "", false},
		{"a read whose answer was lost is sent again", "GET /loads",
			[]http.HandlerFunc{fakenode.HangUp, fakenode.OK(http.StatusOK, []api.PartitionLoads{})},
			func(ctx context.Context, c *Client) error { _, err := c.Loads(ctx, "", ""); return err }, 0, 0, "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n := fakenode.New(t)
			n.Status("a", api.StateLeader, "a", n.Host())
			n.Answers(tt.route, tt.seq...)
			// The same node twice: a read that moves on lands on it again.
			c := mustClient(t, Config{Addrs: []string{n.URL, n.URL}, RetryTimeout: tt.retryFor})
			err := tt.call(ctxFor(t), c)
			var e *Error
			switch {
			case tt.wantCode == "" && tt.name == "step down: a lost answer is not retried":
				if err == nil || CodeOf(err) != "" || !strings.Contains(err.Error(), "may or may not have taken effect") {
					t.Fatalf("error %v, want a transport error saying the outcome is unknown", err)
				}
			case tt.wantCode == "" && tt.name == "a booking whose answer was lost is not sent again":
				if err == nil {
					t.Fatal("a lost booking answer was reported as success")
				}
			case tt.wantCode == "":
				if err != nil {
					t.Fatalf("error %v", err)
				}
			case !errors.As(err, &e) || e.Code != tt.wantCode || e.AfterUnknownOutcome != tt.wantAfter:
				t.Fatalf("error %#v, want code %s (after unknown %v)", err, tt.wantCode, tt.wantAfter)
			}
			got := len(n.Requests(tt.route))
			switch {
			case tt.wantTries > 0 && got != tt.wantTries:
				t.Fatalf("%d tries, want %d", got, tt.wantTries)
			case tt.wantTries == 0 && got < 2:
				t.Fatalf("%d tries, want several", got)
			}
		})
	}
}

// storedWorker is the answer to a catalog write of worker 7.
var storedWorker = api.WorkerWritten{Worker: api.Worker{WorkerID: 7, ModelName: "llama", TenantID: "default",
	Lifecycle: api.LifecycleSchedulable}, CatalogIndex: 12}

func deleteWorker7(ctx context.Context, c *Client) error {
	_, err := c.DeleteWorker(ctx, 7)
	return err
}

// Test_RetryNotify checks that a leader-only call reports each retry, in
// order, with why the attempt before it failed; and that a call that needs
// none reports nothing.
func Test_RetryNotify(t *testing.T) {
	n := fakenode.New(t)
	n.Status("a", api.StateFollower, "", "")
	n.Answers("DELETE /workers/7", fakenode.Error(api.CodeNoLeader, "x"), fakenode.Error(api.CodeNotLeader, "y"),
		fakenode.OK(http.StatusOK, storedWorker))
	n.Answer("DELETE /workers/8", http.StatusOK, storedWorker)
	c := mustClient(t, Config{Addrs: []string{n.URL}})
	var got []Retry
	ctx := WithRetryNotify(ctxFor(t), func(r Retry) { got = append(got, r) })
	if _, err := c.DeleteWorker(ctx, 7); err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].Attempts != 1 || got[1].Attempts != 2 || CodeOf(got[0].Err) != api.CodeNoLeader ||
		CodeOf(got[1].Err) != api.CodeNotLeader || got[1].Elapsed < firstBackoff {
		t.Fatalf("retries reported: %+v", got)
	}
	got = nil
	if _, err := c.DeleteWorker(ctx, 8); err != nil || len(got) != 0 {
		t.Fatalf("a write that needed no retry: %v, reported %+v", err, got)
	}
}

// Test_RedirectChain checks that 307s are followed with the method, body
// and token, at most maxRedirects times.
func Test_RedirectChain(t *testing.T) {
	for _, hops := range []int{1, maxRedirects, maxRedirects + 1} {
		n := fakenode.New(t)
		n.Mux.HandleFunc("PATCH /workers/{id}", func(w http.ResponseWriter, r *http.Request) {
			if hop := len(n.Requests("PATCH /workers/7")); hop <= hops {
				// A relative Location, as a proxy might send.
				http.Redirect(w, r, "/workers/7?hop="+string(rune('0'+hop)), http.StatusTemporaryRedirect)
				return
			}
			fakenode.WriteJSON(w, http.StatusOK, storedWorker)
		})
		c := mustClient(t, Config{Addrs: []string{n.URL}, Token: "tok", Pinned: true})
		_, err := c.PatchWorker(ctxFor(t), 7, api.WorkerFields{Endpoint: api.Ptr("x")})
		if wantErr := hops > maxRedirects; (err != nil) != wantErr || wantErr && !strings.Contains(err.Error(), "stopped after 5 redirects") {
			t.Fatalf("%d hops: error %v", hops, err)
		}
		for _, g := range n.Requests("PATCH /workers/7") {
			if g.Body != `{"endpoint":"x"}` || g.Auth != "Bearer tok" {
				t.Fatalf("hop lost the body or token: %+v", g)
			}
		}
	}
}

// Test_HomeNode checks node affinity: reads and bookings go to the first
// node that answers, skip dead addresses, never ask for the leader, and
// stay on the node found.
func Test_HomeNode(t *testing.T) {
	a, b := fakenode.New(t), fakenode.New(t)
	for _, n := range []*fakenode.Node{a, b} {
		n.Answer("GET /loads", http.StatusOK, []api.PartitionLoads{})
		n.Answer("POST /select", http.StatusOK, api.Selection{WorkerID: 1})
	}
	c := mustClient(t, Config{Addrs: []string{fakenode.DeadAddr(t), a.Host(), b.URL}})
	ctx := ctxFor(t)
	if _, err := c.Loads(ctx, "", ""); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Select(ctx, api.SelectRequest{Prompt: api.Prompt{TokenIDs: api.TokenIDs{1}}}); err != nil {
		t.Fatal(err)
	}
	if c.Home() != a.URL || len(a.Requests("GET /loads")) != 1 || len(a.Requests("POST /select")) != 1 ||
		len(b.All()) != 0 || len(a.Requests("GET /cluster/status")) != 0 {
		t.Fatalf("home %s; a got %+v, b got %+v", c.Home(), a.All(), b.All())
	}
}

// Test_SessionConsistency: the highest catalog index any answer carried is
// sent with every selection and catalog read, never lowered.
func Test_SessionConsistency(t *testing.T) {
	n := fakenode.New(t)
	n.Answer("POST /workers", http.StatusCreated, storedWorker, api.HeaderIndex, "12")
	n.Answer("POST /select", http.StatusOK, api.Selection{})
	n.Answer("POST /reservations", http.StatusCreated, api.Reservation{})
	n.Answer("GET /workers", http.StatusOK, []api.Worker{}, api.HeaderIndex, "9")
	n.Answer("GET /loads", http.StatusOK, []api.PartitionLoads{})
	c := mustClient(t, Config{Addrs: []string{n.URL}})
	ctx := ctxFor(t)
	if _, err := c.Select(ctx, api.SelectRequest{}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.RegisterWorker(ctx, api.WorkerSpec{WorkerID: 7}); err != nil {
		t.Fatal(err)
	}
	for _, call := range []func() error{
		func() error { _, err := c.Select(ctx, api.SelectRequest{}); return err },
		func() error { _, err := c.Reserve(ctx, api.ReserveRequest{ReservationID: "r"}); return err },
		func() error { _, err := c.Workers(ctx, WorkersOptions{}); return err },
		func() error { _, err := c.Loads(ctx, "", ""); return err },
	} {
		if err := call(); err != nil {
			t.Fatal(err)
		}
	}
	c.ObserveCatalogIndex(5) // lower: ignored
	if _, err := c.Select(ctx, api.SelectRequest{}); err != nil {
		t.Fatal(err)
	}
	c.ObserveCatalogIndex(40)
	if _, err := c.Select(ctx, api.SelectRequest{}); err != nil {
		t.Fatal(err)
	}
	var idx []string
	for _, g := range n.All() {
		idx = append(idx, g.Route()+"="+g.Index)
	}
	want := "POST /select= POST /workers= POST /select=12 POST /reservations=12 GET /workers=12 GET /loads= POST /select=12 POST /select=40"
	if strings.Join(idx, " ") != want {
		t.Fatalf("indexes sent:\n%s\nwant\n%s", strings.Join(idx, " "), want)
	}
}

// Test_ErrorBodies: both error shapes decode to a code, and a body that is
// not JSON keeps the status's text.
func Test_ErrorBodies(t *testing.T) {
	n := fakenode.New(t)
	n.Answer("POST /select", http.StatusServiceUnavailable, api.Busy{Message: api.BusyMessage, Type: api.BusyType, Code: 503})
	n.Mux.HandleFunc("GET /loads", func(w http.ResponseWriter, _ *http.Request) { http.Error(w, "bad gateway", http.StatusBadGateway) })
	n.Answer("GET /ready", http.StatusServiceUnavailable, api.Ready{Ready: false, Workers: []api.Worker{}})
	n.Answer("POST /potential_loads", http.StatusServiceUnavailable, api.Error{Code: api.CodeUnknownPartition,
		Message: `unknown partition: no worker was ever registered for model_name "lama" tenant_id "default"`})
	n.Answer("POST /overlap_scores", http.StatusServiceUnavailable, api.Error{Code: api.CodeNotReady, Message: "no schedulable worker"})
	c := mustClient(t, Config{Addrs: []string{n.URL}})
	ctx := ctxFor(t)
	_, err := c.Select(ctx, api.SelectRequest{})
	if e := (*Error)(nil); !errors.As(err, &e) || e.Code != api.CodeOverloaded || e.Message != api.BusyMessage || e.Status != 503 {
		t.Fatalf("busy: %v", err)
	}
	if UnknownPartition(err) {
		t.Fatalf("busy reads as unknown_partition: %v", err)
	}
	// A typo and an outage are both 503s; only the code tells them apart.
	if _, err := c.PotentialLoads(ctx, api.Prompt{ModelName: "lama"}); !UnknownPartition(err) || !strings.Contains(err.Error(), `"lama"`) {
		t.Fatalf("unknown partition: %v", err)
	}
	if _, err := c.OverlapScores(ctx, api.Prompt{}); UnknownPartition(err) || CodeOf(err) != api.CodeNotReady {
		t.Fatalf("not ready: %v", err)
	}
	if _, err := c.Loads(ctx, "", ""); CodeOf(err) != "bad_gateway" || !strings.Contains(err.Error(), "bad gateway (HTTP 502)") {
		t.Fatalf("not JSON: %v", err)
	}
	if r, err := c.Ready(ctx); err != nil || r.Ready {
		t.Fatalf("ready 503 = %+v, %v; want not ready, no error", r, err)
	}
	if _, err := c.Select(ctx, api.SelectRequest{ReservationID: "r"}); err == nil || CodeOf(err) != "" {
		t.Fatalf("Select with a reservation id: %v", err)
	}
}

// Test_Pinned: a pinned client tries its one address once.
func Test_Pinned(t *testing.T) {
	n := fakenode.New(t)
	n.Answer("POST /cluster/join", http.StatusServiceUnavailable, api.Error{Message: "x", Code: api.CodeNotLeader})
	n.Status("a", api.StateFollower, "b", "127.0.0.1:1")
	c := mustClient(t, Config{Addrs: []string{n.URL}, Pinned: true})
	if _, err := c.Join(ctxFor(t), api.JoinRequest{ID: "n4"}); CodeOf(err) != api.CodeNotLeader {
		t.Fatalf("join: %v", err)
	}
	if len(n.Requests("POST /cluster/join")) != 1 || len(n.Requests("GET /cluster/status")) != 0 {
		t.Fatalf("pinned client retried or looked for the leader: %+v", n.All())
	}
}

// Test_BadPathIDs: an id no node accepts is refused before anything is
// sent, as the Python client does, instead of becoming another path.
func Test_BadPathIDs(t *testing.T) {
	n := fakenode.New(t)
	c := mustClient(t, Config{Addrs: []string{n.URL}})
	ctx := ctxFor(t)
	calls := map[string]func(id string) error{
		"PrefillComplete": func(id string) error { return c.PrefillComplete(ctx, id) },
		"OutputBlock":     func(id string) error { return c.OutputBlock(ctx, id, nil) },
		"Free":            func(id string) error { return c.Free(ctx, id) },
		"Reservation":     func(id string) error { _, err := c.Reservation(ctx, id); return err },
	}
	for _, id := range []string{"", "a/b", "a?b", "a b", "100%", strings.Repeat("x", api.MaxIDLen+1), "é"} {
		for name, call := range calls {
			if err := call(id); !errors.Is(err, api.ErrBadID) {
				t.Errorf("%s(%q) = %v, want api.ErrBadID", name, id, err)
			}
		}
	}
	if all := n.All(); len(all) != 0 {
		t.Fatalf("the node got %d requests: %+v", len(all), all)
	}
}

func Test_New(t *testing.T) {
	tests := []struct {
		addrs   []string
		want    string
		wantErr bool
	}{
		{addrs: []string{"127.0.0.1:8092"}, want: "http://127.0.0.1:8092"},
		{addrs: []string{" n1:1", " http://n2:2/ ", "https://n3"}, want: "http://n1:1 http://n2:2 https://n3"},
		{addrs: nil, wantErr: true},
		{addrs: []string{" ", ""}, wantErr: true},
		{addrs: []string{"http://"}, wantErr: true},
		{addrs: []string{"ftp://x:1"}, wantErr: true},
	}
	for _, tt := range tests {
		c, err := New(Config{Addrs: tt.addrs})
		if (err != nil) != tt.wantErr || err == nil && strings.Join(c.addrs, " ") != tt.want {
			t.Errorf("New(%q) = %v, %v", tt.addrs, c, err)
		}
	}
}

// Test_NextLocation: a redirect resolves against the request's URL, and one
// from https into plain http is refused: the client follows redirects with
// its token (found by review).
func Test_NextLocation(t *testing.T) {
	for _, tt := range []struct {
		from, location, want string
		refused              bool
	}{
		{"http://a:1/workers", "http://b:2/workers", "http://b:2/workers", false},
		{"https://a:1/workers", "https://b:2/workers?x=1", "https://b:2/workers?x=1", false},
		{"https://a:1/workers", "/workers/7", "https://a:1/workers/7", false},
		{"http://a:1/workers", "https://b:2/workers", "https://b:2/workers", false},
		{"https://a:1/workers", "http://b:2/workers", "", true},
		{"https://a:1/workers", "HTTP://b:2/workers", "", true},
	} {
		got, err := nextLocation(tt.from, tt.location)
		if tt.refused != (err != nil) || got != tt.want {
			t.Errorf("nextLocation(%q, %q) = %q, %v", tt.from, tt.location, got, err)
		}
	}
}

// Test_SelectionReadyz: SelectionReadyz asks GET /readyz?for=selection
// (the pod probe, SPEC §3.2), not plain /readyz, and a 503 is an answer,
// not an error.
func Test_SelectionReadyz(t *testing.T) {
	n := fakenode.New(t)
	n.Mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get(api.QueryFor) == api.ReadyzForSelection {
			fakenode.WriteJSON(w, http.StatusOK, api.Readyz{Ready: true, CaughtUp: true})
			return
		}
		fakenode.WriteJSON(w, http.StatusServiceUnavailable, api.Readyz{Reason: api.ReadyzNoLeader, Code: api.CodeNotReady, CaughtUp: true})
	})
	c := mustClient(t, Config{Addrs: []string{n.URL}})
	ctx := ctxFor(t)
	if r, err := c.SelectionReadyz(ctx); err != nil || !r.Ready || !r.CaughtUp {
		t.Fatalf("SelectionReadyz = %+v, %v; want ready", r, err)
	}
	if r, err := c.Readyz(ctx); err != nil || r.Ready || r.Reason != api.ReadyzNoLeader {
		t.Fatalf("Readyz = %+v, %v; want 503 no_leader, no error", r, err)
	}
	got := n.Requests("GET /readyz")
	if len(got) != 2 || got[0].Query != "for=selection" || got[1].Query != "" {
		t.Fatalf("requests %+v: want ?for=selection, then none", got)
	}
}
