package client

import (
	"crypto/x509"
	"encoding/pem"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kvselect/kvselect/api"
	"github.com/kvselect/kvselect/internal/fakenode"
)

// Test_HTTPSLeaderFollowing: over HTTPS, with the cluster's CA, a write
// that the home node cannot place goes to the leader the home's
// /cluster/status names as host:port, at https (a cluster serves one
// scheme); without the CA the client trusts neither node.
func Test_HTTPSLeaderFollowing(t *testing.T) {
	a, b := fakenode.NewTLS(t), fakenode.NewTLS(t)
	caFile := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(caFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: a.Certificate().Raw}), 0o600); err != nil {
		t.Fatal(err)
	}
	a.Answer("POST /workers", http.StatusServiceUnavailable, api.Error{Message: "no leader", Code: api.CodeNoLeader})
	a.Status("a", api.StateFollower, "b", b.Host())
	b.Answer("POST /workers", http.StatusCreated, storedWorker, api.HeaderServedBy, "b")

	c := mustClient(t, Config{Addrs: []string{a.URL}, Token: "tok", CAFile: caFile})
	if _, err := c.RegisterWorker(ctxFor(t), api.WorkerSpec{WorkerID: 7, Endpoint: "http://w7", BlockSize: 16}); err != nil {
		t.Fatal(err)
	}
	if got := b.Requests("POST /workers"); len(got) != 1 || got[0].Auth != "Bearer tok" {
		t.Fatalf("the leader got %+v", got)
	}

	stranger := mustClient(t, Config{Addrs: []string{a.URL}})
	var unknown x509.UnknownAuthorityError
	if _, err := stranger.Health(ctxFor(t)); !errors.As(err, &unknown) {
		t.Fatalf("without the CA: %v", err)
	}
}

// Test_CAFileErrors: a CA file that cannot serve, and a transport the
// client cannot give it to, are errors of New.
func Test_CAFileErrors(t *testing.T) {
	dir := t.TempDir()
	notPEM := filepath.Join(dir, "not.pem")
	if err := os.WriteFile(notPEM, []byte("hello"), 0o600); err != nil {
		t.Fatal(err)
	}
	good := filepath.Join(dir, "good.pem")
	a := fakenode.NewTLS(t)
	if err := os.WriteFile(good, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: a.Certificate().Raw}), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name string
		cfg  Config
		want string
	}{
		{"missing", Config{CAFile: filepath.Join(dir, "nope.pem")}, "no such file"},
		{"not PEM", Config{CAFile: notPEM}, "holds no PEM certificate"},
		{"a transport of its own", Config{CAFile: good, HTTPClient: &http.Client{Transport: roundTripper(nil)}}, "needs an *http.Transport"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			tt.cfg.Addrs = []string{a.URL}
			if _, err := New(tt.cfg); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("New = %v, want an error saying %q", err, tt.want)
			}
		})
	}
	if _, err := New(Config{Addrs: []string{a.URL}, CAFile: notPEM}); !errors.Is(err, ErrCAFile) {
		t.Fatalf("not ErrCAFile: %v", err)
	}
	// The caller's *http.Transport is copied, never changed.
	tr := http.DefaultTransport.(*http.Transport).Clone()
	before := tr.TLSClientConfig
	if _, err := New(Config{Addrs: []string{a.URL}, CAFile: good, HTTPClient: &http.Client{Transport: tr}}); err != nil ||
		tr.TLSClientConfig != before || before != nil && before.RootCAs != nil {
		t.Fatalf("New = %v; the caller's transport changed", err)
	}
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

func Test_BaseURLWithScheme(t *testing.T) {
	for _, tt := range []struct{ scheme, addr, want string }{
		{"http", "h:1", "http://h:1"},
		{"https", "h:1/", "https://h:1"},
		{"https", "http://h:1", "http://h:1"},
	} {
		if got := BaseURLWithScheme(tt.scheme, tt.addr); got != tt.want {
			t.Errorf("BaseURLWithScheme(%q, %q) = %q, want %q", tt.scheme, tt.addr, got, tt.want)
		}
	}
	if got := peerURL("https://a:1", "b:2"); got != "https://b:2" {
		t.Errorf("peerURL from https = %q", got)
	}
}
