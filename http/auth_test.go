package http

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/kvselect/kvselect/api"
	"github.com/kvselect/kvselect/internal/authtoken"
)

// Test_AuthEveryRoute sends every route of the router (the table the
// OpenAPI document is checked against, so a new route is covered without
// editing this test) each Authorization a client might send, under both
// scopes: a route its access class protects answers 401 with
// WWW-Authenticate and code unauthorized to every bad one, and never 401
// to the token; an unprotected route never answers 401. The bearer scheme
// is case-insensitive (RFC 7235 §2.1); the token is not.
func Test_AuthEveryRoute(t *testing.T) {
	const token = "s3cret"
	bad := map[string]string{
		"no header":          "",
		"wrong token":        "Bearer wrong",
		"token's prefix":     "Bearer s3cre",
		"token plus":         "Bearer s3cret2",
		"token in uppercase": "Bearer S3CRET",
		"empty token":        "Bearer ",
		"scheme only":        "Bearer",
		"no scheme":          token,
		"basic scheme":       "Basic czNjcmV0",
		"lowercase, wrong":   "bearer wrong",
	}
	good := []string{"Bearer " + token, "bearer " + token, "BEARER " + token, "Bearer  " + token}
	routes := newFakeNode().service().routes()
	for _, all := range []bool{false, true} {
		scope := map[bool]string{false: "admin", true: "all"}[all]
		auth := authtoken.NewHolder(token)
		base := serve(t, newFakeNode().service(func(c *Config) { c.Auth, c.AuthAll = auth, all }))
		protected := 0
		for _, rt := range routes {
			path := strings.ReplaceAll(rt.path, "{id}", "1")
			methods := []string{rt.method}
			if rt.method == http.MethodGet {
				methods = append(methods, http.MethodHead)
			}
			for _, method := range methods {
				name := scope + "/" + method + " " + rt.path
				if rt.access == api.AccessAdmin || rt.access == api.AccessSelection && all {
					protected++
					for what, authz := range bad {
						status, hdr, code := authCall(t, base, method, path, authz)
						if status != http.StatusUnauthorized || hdr.Get("WWW-Authenticate") == "" ||
							method != http.MethodHead && code != string(api.CodeUnauthorized) {
							t.Errorf("%s with %s: %d, WWW-Authenticate %q, code %q; want 401", name, what, status, hdr.Get("WWW-Authenticate"), code)
						}
					}
					for _, authz := range good {
						if status, _, _ := authCall(t, base, method, path, authz); status == http.StatusUnauthorized {
							t.Errorf("%s with %q: 401", name, authz)
						}
					}
					continue
				}
				if status, _, _ := authCall(t, base, method, path, ""); status == http.StatusUnauthorized {
					t.Errorf("%s (access %s) without a token: 401", name, rt.access)
				}
			}
		}
		if protected == 0 {
			t.Fatalf("scope %s: no route is protected", scope)
		}
	}
}

// Test_AuthRotation: once the holder's token changes, the next request
// with the old one is refused and the new one is accepted; no restart,
// no grace.
func Test_AuthRotation(t *testing.T) {
	auth := authtoken.NewHolder("old")
	base := serve(t, newFakeNode().service(func(c *Config) { c.Auth = auth }))
	if status, _, _ := authCall(t, base, "GET", api.PathDump, "Bearer old"); status != http.StatusOK {
		t.Fatalf("before the rotation: %d", status)
	}
	auth.Set("new")
	if status, _, _ := authCall(t, base, "GET", api.PathDump, "Bearer old"); status != http.StatusUnauthorized {
		t.Fatalf("old token after the rotation: %d", status)
	}
	if status, _, _ := authCall(t, base, "GET", api.PathDump, "Bearer new"); status != http.StatusOK {
		t.Fatalf("new token after the rotation: %d", status)
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
