package http

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/kvselect/kvselect/api"
	"github.com/kvselect/kvselect/internal/authtoken"
)

// What SPEC §11 says, written out independently of the router's access
// classes, so that a route given the wrong class fails here.

// specOpen are the routes no token guards, whatever the scope.
var specOpen = map[string]bool{
	"GET " + api.PathHealth: true, "GET " + api.PathReady: true, "GET " + api.PathReadyz: true, "GET " + api.PathOpenAPI: true,
}

// specSelection are the routes the selection token opens: "/select,
// /select_and_reserve, /reservations and its lifecycle routes,
// /potential_loads, /overlap_scores, /loads, worker keepalives, and reads
// of /workers, /policies, /busy_threshold, /cluster/status and /metrics".
var specSelection = map[string]bool{
	"POST " + api.PathSelect: true, "POST " + api.PathSelectAndReserve: true,
	"POST " + api.PathReservations: true, "GET " + api.PathReservations: true,
	"GET " + api.PathReservation: true, "DELETE " + api.PathReservation: true,
	"POST " + api.PathPrefillComplete: true, "POST " + api.PathOutputBlock: true,
	"POST " + api.PathPotentialLoads: true, "POST " + api.PathOverlapScores: true, "GET " + api.PathLoads: true,
	"POST " + api.PathKeepAlive: true, "POST " + api.PathWorkerKeepAlive: true,
	"GET " + api.PathWorkers: true, "GET " + api.PathWorker: true, "GET " + api.PathBusyThreshold: true,
	"GET " + api.PathPolicies: true, "GET " + api.PathClusterStatus: true, "GET " + api.PathMetrics: true,
}

// specAdminScope reports whether --auth-scope admin guards a route:
// "catalog writes, /busy_threshold writes, /policies writes, /cluster/*
// writes, /replica_sync/* writes and /dump", and, by this implementation's
// choice (README), worker keepalives, which a worker's own token
// (either) opens.
func specAdminScope(method, path string) bool {
	write := method != http.MethodGet && method != http.MethodHead
	switch {
	case path == api.PathDump, path == api.PathKeepAlive, path == api.PathWorkerKeepAlive:
		return true
	case !write:
		return false
	}
	return path == api.PathWorkers || path == api.PathWorker || path == api.PathBusyThreshold || path == api.PathPolicies ||
		strings.HasPrefix(path, "/cluster/") || strings.HasPrefix(path, "/replica_sync/")
}

// outcome of a request as far as authentication goes.
type outcome int

const (
	passes       outcome = iota // neither 401 nor 403
	unauthorized                // 401 unauthorized with WWW-Authenticate
	forbidden                   // 403 forbidden with WWW-Authenticate insufficient_scope
)

func (o outcome) String() string { return [...]string{"passes", "401", "403"}[o] }

// Credentials a client might send, for a node whose admin token file holds
// "adm-new\nadm-old" and whose selection token file "sel-new\nsel-old".
var credentials = []struct {
	name, authz string
	role        string // "", "admin" or "selection"
}{
	{"no header", "", ""},
	{"wrong token", "Bearer wrong", ""},
	{"admin token's prefix", "Bearer adm-ne", ""},
	{"admin token plus", "Bearer adm-new2", ""},
	{"admin token in uppercase", "Bearer ADM-NEW", ""},
	{"both admin lines as one", "Bearer adm-new adm-old", ""},
	{"empty token", "Bearer ", ""},
	{"scheme only", "Bearer", ""},
	{"no scheme", "adm-new", ""},
	{"basic scheme", "Basic YWRtLW5ldw==", ""},
	{"admin, first line", "Bearer adm-new", "admin"},
	{"admin, second line", "Bearer adm-old", "admin"},
	{"admin, lowercase scheme", "bearer adm-new", "admin"},
	{"admin, two spaces", "Bearer  adm-old", "admin"},
	{"selection, first line", "Bearer sel-new", "selection"},
	{"selection, second line", "BEARER sel-old", "selection"},
	{"selection token's prefix", "Bearer sel-ne", ""},
}

// want is SPEC §11's answer to a request with a role's token.
func want(scope Scope, method, path, role string) outcome {
	key := method + " " + path
	if method == http.MethodHead {
		key = http.MethodGet + " " + path
	}
	guarded := !specOpen[key] && (scope == ScopeAll || specAdminScope(method, path))
	switch {
	case !guarded, role == "admin":
		return passes
	case role == "selection" && specSelection[key]:
		return passes
	case role == "selection":
		return forbidden
	}
	return unauthorized
}

// Test_AuthEveryRoute sends every route of the router (the table the
// OpenAPI document is checked against, so a new route is covered without
// editing this test) every credential above, under both scopes, and
// checks SPEC §11's answer: 401 with a challenge and code unauthorized,
// 403 with an insufficient_scope challenge and code forbidden, or neither.
// Both lines of each token file are accepted; the bearer scheme is
// case-insensitive (RFC 7235 §2.1), the token is not.
func Test_AuthEveryRoute(t *testing.T) {
	routes := newFakeNode().service().routes()
	for _, scope := range []Scope{ScopeAll, ScopeAdmin} {
		admin, selection := authtoken.NewHolder("adm-new"), authtoken.NewHolder("sel-new")
		admin.SetTokens("adm-new", "adm-old")
		selection.SetTokens("sel-new", "sel-old")
		base := serve(t, newFakeNode().service(func(c *Config) { c.Auth, c.Selection, c.Scope = admin, selection, scope }))
		counts := map[outcome]int{}
		for _, rt := range routes {
			path := strings.ReplaceAll(rt.path, "{id}", "1")
			methods := []string{rt.method}
			if rt.method == http.MethodGet {
				methods = append(methods, http.MethodHead)
			}
			for _, method := range methods {
				for _, cred := range credentials {
					want := want(scope, method, rt.path, cred.role)
					counts[want]++
					status, hdr, code := authCall(t, base, method, path, cred.authz)
					got := passes
					switch status {
					case http.StatusUnauthorized:
						got = unauthorized
					case http.StatusForbidden:
						got = forbidden
					}
					challenge := hdr.Get("WWW-Authenticate")
					switch {
					case got != want:
						t.Errorf("scope %s, %s %s (class %s) with %s: %d, want %s", scope, method, rt.path, rt.access, cred.name, status, want)
					case got == unauthorized && (challenge != `Bearer realm="kvselect"` || method != http.MethodHead && code != string(api.CodeUnauthorized)):
						t.Errorf("scope %s, %s %s with %s: 401 with WWW-Authenticate %q and code %q", scope, method, rt.path, cred.name, challenge, code)
					case got == forbidden && (!strings.Contains(challenge, `error="insufficient_scope"`) || method != http.MethodHead && code != string(api.CodeForbidden)):
						t.Errorf("scope %s, %s %s with %s: 403 with WWW-Authenticate %q and code %q", scope, method, rt.path, cred.name, challenge, code)
					}
				}
			}
		}
		if counts[unauthorized] == 0 || counts[forbidden] == 0 || counts[passes] == 0 {
			t.Fatalf("scope %s: the table checks too little: %v", scope, counts)
		}
	}
}

// Without an admin token every route is open, whatever the scope, the
// selection token or the Authorization sent.
func Test_AuthWithoutToken(t *testing.T) {
	for _, scope := range []Scope{ScopeAll, ScopeAdmin} {
		base := serve(t, newFakeNode().service(func(c *Config) { c.Scope = scope }))
		for _, rt := range newFakeNode().service().routes() {
			for _, authz := range []string{"", "Bearer anything"} {
				if status, _, _ := authCall(t, base, rt.method, strings.ReplaceAll(rt.path, "{id}", "1"), authz); status == http.StatusUnauthorized || status == http.StatusForbidden {
					t.Errorf("scope %s, %s %s with %q: %d", scope, rt.method, rt.path, authz, status)
				}
			}
		}
	}
}

// Test_AuthRotation: once a holder's tokens change, the next request with
// a token no longer held is refused and the new ones are accepted; no
// restart, no grace. The rotation is the two-line one of the README.
func Test_AuthRotation(t *testing.T) {
	admin, selection := authtoken.NewHolder("old"), authtoken.NewHolder("sel-old")
	base := serve(t, newFakeNode().service(func(c *Config) { c.Auth, c.Selection = admin, selection }))
	for _, step := range []struct {
		name                 string
		admin, selection     [2]string // the token files' lines
		accepted, refused    []string
		selectionOK, selNope []string
	}{
		{"before", [2]string{"old"}, [2]string{"sel-old"}, []string{"old"}, []string{"new"}, []string{"sel-old"}, []string{"sel-new"}},
		{"phase 1: old, then new", [2]string{"old", "new"}, [2]string{"sel-old", "sel-new"}, []string{"old", "new"}, nil, []string{"sel-old", "sel-new"}, nil},
		{"phase 2: new, then old", [2]string{"new", "old"}, [2]string{"sel-new", "sel-old"}, []string{"old", "new"}, nil, []string{"sel-old", "sel-new"}, nil},
		{"phase 3: new", [2]string{"new"}, [2]string{"sel-new"}, []string{"new"}, []string{"old"}, []string{"sel-new"}, []string{"sel-old"}},
	} {
		admin.SetTokens(step.admin[0], step.admin[1])
		selection.SetTokens(step.selection[0], step.selection[1])
		for _, tok := range step.accepted {
			if status, _, _ := authCall(t, base, "GET", api.PathDump, "Bearer "+tok); status != http.StatusOK {
				t.Errorf("%s: admin token %q on /dump: %d", step.name, tok, status)
			}
		}
		for _, tok := range append(step.refused, step.selNope...) {
			if status, _, _ := authCall(t, base, "GET", api.PathLoads, "Bearer "+tok); status != http.StatusUnauthorized {
				t.Errorf("%s: token %q no longer held on /loads: %d", step.name, tok, status)
			}
		}
		for _, tok := range step.selectionOK {
			if status, _, _ := authCall(t, base, "GET", api.PathLoads, "Bearer "+tok); status != http.StatusOK {
				t.Errorf("%s: selection token %q on /loads: %d", step.name, tok, status)
			}
			if status, _, _ := authCall(t, base, "GET", api.PathDump, "Bearer "+tok); status != http.StatusForbidden {
				t.Errorf("%s: selection token %q on /dump: %d", step.name, tok, status)
			}
		}
	}
}

// authCall sends one request with the given Authorization ("" for none)
// and returns the status, the headers and the error code of the answer.
func authCall(t *testing.T, base, method, path, authz string) (int, http.Header, string) {
	t.Helper()
	var body *strings.Reader
	if method == http.MethodGet || method == http.MethodHead {
		body = strings.NewReader("")
	} else {
		body = strings.NewReader("{}")
	}
	req, err := http.NewRequest(method, base+path, body)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if authz != "" {
		req.Header.Set(api.HeaderAuthorization, authz)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var e api.Error
	_ = json.NewDecoder(resp.Body).Decode(&e)
	return resp.StatusCode, resp.Header, string(e.Code)
}

// Test_ReadyHidesWorkersWithoutToken: /ready stays open (probes call it
// without a token), but the worker records it lists are the catalog GET
// /workers guards, so a caller /workers would refuse gets them empty; the
// verdict and the counts stay.
func Test_ReadyHidesWorkersWithoutToken(t *testing.T) {
	for _, tt := range []struct {
		scope       Scope
		authz       string
		wantWorkers bool
	}{
		{ScopeAll, "", false},
		{ScopeAll, "Bearer wrong", false},
		{ScopeAll, "Bearer sel", true},
		{ScopeAll, "Bearer adm", true},
		{ScopeAdmin, "", true},
	} {
		f := newFakeNode()
		base := serve(t, f.service(func(c *Config) {
			c.Auth, c.Selection, c.Scope = authtoken.NewHolder("adm"), authtoken.NewHolder("sel"), tt.scope
		}))
		if status, _, body := call(t, "POST", base+"/workers", registration, api.HeaderAuthorization, "Bearer adm"); status != 201 {
			t.Fatalf("register: %d %s", status, body)
		}
		req, _ := http.NewRequest(http.MethodGet, base+"/ready", nil)
		if tt.authz != "" {
			req.Header.Set(api.HeaderAuthorization, tt.authz)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var got api.Ready
		err = json.NewDecoder(resp.Body).Decode(&got)
		resp.Body.Close()
		if err != nil || resp.StatusCode != 200 || !got.Ready || got.SchedulableWorkers != 1 || got.Workers == nil ||
			(len(got.Workers) == 1) != tt.wantWorkers {
			t.Errorf("scope %s, %q: %d %+v %v; want worker records %v", tt.scope, tt.authz, resp.StatusCode, got, err, tt.wantWorkers)
		}
	}
}
