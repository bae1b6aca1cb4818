package server_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net/http"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/kvselect/kvselect/api"
	"github.com/kvselect/kvselect/client"
	"github.com/kvselect/kvselect/internal/testpki"
	"github.com/kvselect/kvselect/server"
	"github.com/kvselect/kvselect/server/servertest"
)

// Test_TLSCluster runs a three-node cluster over HTTPS, with a token and
// a CA of its own, and checks it from outside: clients that trust the CA
// get every answer (a write through a follower, forwarded to the leader
// over https; the leader found from a follower's /cluster/status; a
// redirect to an https Location); plain HTTP and clients that do not
// trust the CA get none. A fourth node joins through a follower and
// recovers its index from a member's /dump, both over https, verifying
// the members with --tls-ca-file; one given another CA cannot join.
func Test_TLSCluster(t *testing.T) {
	dir := t.TempDir()
	ca := testpki.NewCA(t, dir, "cluster")
	withTLS := func(i int, cfg *server.Config) {
		leaf := ca.Issue(t, servertest.NodeID(i))
		cfg.TLS = &server.TLSConfig{CertFile: leaf.CertFile, KeyFile: leaf.KeyFile, CAFile: ca.CertFile}
		cfg.AuthToken = "s3cret"
	}
	c := servertest.StartCluster(t, 3, withTLS) // converged: every node published its metadata over https
	leader, f := c.Leader(), c.Followers()[0]
	if !strings.HasPrefix(f.URL(), "https://") {
		t.Fatalf("URL %s", f.URL())
	}
	ctx := context.Background()
	kv, err := client.New(client.Config{Addrs: []string{f.URL()}, Token: "s3cret", CAFile: ca.CertFile})
	if err != nil {
		t.Fatal(err)
	}
	var info client.ResponseInfo
	if _, err := kv.RegisterWorker(client.WithResponseInfo(ctx, &info), api.WorkerSpec{WorkerID: 1, ModelName: "m",
		Endpoint: "http://w1", BlockSize: 16, KVEventsEndpoints: map[uint32]string{0: "tcp://127.0.0.1:1"}}); err != nil {
		t.Fatalf("write through follower %s: %v", f.Node.ID(), err)
	}
	if info.ServedBy != leader.Node.ID() {
		t.Fatalf("served by %q, want the leader %s", info.ServedBy, leader.Node.ID())
	}
	for _, s := range c.Live() {
		cl, err := client.New(client.Config{Addrs: []string{s.URL()}, Token: "s3cret", CAFile: ca.CertFile})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := cl.Select(ctx, api.SelectRequest{Prompt: api.Prompt{ModelName: "m", TokenIDs: make([]uint32, 17)}}); err != nil {
			t.Fatalf("select on %s: %v", s.Node.ID(), err)
		}
	}

	// With ?redirect=true a follower answers 307 with the leader's
	// Location, at https.
	pinnedRedirect := httpsClient(t, ca.CertFile)
	req, _ := http.NewRequest("DELETE", f.URL()+"/workers/1?redirect=true", nil)
	req.Header.Set("Authorization", "Bearer s3cret")
	resp, err := pinnedRedirect.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if loc, _ := url.Parse(resp.Header.Get("Location")); resp.StatusCode != http.StatusTemporaryRedirect || loc == nil ||
		loc.Scheme != "https" || loc.Host != leader.Addr() {
		t.Fatalf("redirect: %d Location %q, want 307 to https://%s", resp.StatusCode, resp.Header.Get("Location"), leader.Addr())
	}

	// Outsiders: plain HTTP on the HTTPS port, and a client that does
	// not trust the cluster's CA.
	if resp, err := http.Get("http://" + f.Addr() + api.PathHealth); err == nil {
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest {
			t.Fatalf("plain HTTP to the HTTPS port: %d", resp.StatusCode)
		}
	}
	stranger, err := client.New(client.Config{Addrs: []string{f.URL()}, Token: "s3cret"})
	if err != nil {
		t.Fatal(err)
	}
	var unknownAuthority x509.UnknownAuthorityError
	if _, err := stranger.Health(ctx); !errors.As(err, &unknownAuthority) {
		t.Fatalf("a client without the CA: %v, want x509.UnknownAuthorityError", err)
	}

	// A fourth node joins through the follower (join and metadata over
	// https) and recovers its index from a member's /dump.
	members := c.Live()
	dumps := func() (n float64) {
		for _, s := range members {
			v, _ := gather(t, s).value("kvselect_http_requests_total", map[string]string{"route": api.PathDump, "status": "200"})
			n += v
		}
		return n
	}
	before := dumps()
	n4 := c.Add(f.URL())
	servertest.Eventually(t, "n4 has recovered its index", func() error {
		if n4.Recovering() {
			return errors.New("still recovering")
		}
		return nil
	})
	c.WaitConverged()
	if dumps() == before {
		t.Fatal("no member served n4 a /dump")
	}

	// A node that trusts another CA verifies the members it calls, and
	// so cannot join.
	other := testpki.NewCA(t, t.TempDir(), "other")
	leaf := other.Issue(t, "n5")
	cfg := servertest.Config("n5", t.TempDir())
	cfg.TLS = &server.TLSConfig{CertFile: leaf.CertFile, KeyFile: leaf.KeyFile, CAFile: other.CertFile}
	cfg.AuthToken = "s3cret"
	cfg.Cluster.Join = []string{f.URL()}
	cfg.Cluster.JoinTimeout = time.Second
	if s, err := server.Start(cfg); err == nil {
		_ = s.Close(ctx)
		t.Fatal("a node that does not trust the members' CA joined")
	} else if !strings.Contains(err.Error(), "certificate") {
		t.Fatalf("join with another CA: %v, want a certificate error", err)
	}
}

// Test_TLSReload: Reload (SIGHUP) makes the node serve a rewritten
// certificate to new connections; a pair that does not load keeps the
// current one, and Reload says why.
func Test_TLSReload(t *testing.T) {
	dir := t.TempDir()
	ca := testpki.NewCA(t, dir, "reload")
	first := ca.Issue(t, "n1")
	cfg := servertest.Config("n1", t.TempDir())
	cfg.TLS = &server.TLSConfig{CertFile: first.CertFile, KeyFile: first.KeyFile}
	s := servertest.MustStart(t, cfg)
	served := func() string {
		t.Helper()
		conn, err := tls.Dial("tcp", s.Addr(), &tls.Config{RootCAs: pool(t, ca.CertFile)})
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		return conn.ConnectionState().PeerCertificates[0].SerialNumber.String()
	}
	if got := served(); got != first.Serial.String() {
		t.Fatalf("serves serial %s, want %s", got, first.Serial)
	}
	second := ca.Issue(t, "n1") // rewrites the files
	if err := s.Reload(); err != nil {
		t.Fatal(err)
	}
	if got := served(); got != second.Serial.String() {
		t.Fatalf("after the reload: serial %s, want %s", got, second.Serial)
	}
	if err := os.WriteFile(second.KeyFile, []byte("not a key"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := s.Reload(); !errors.Is(err, server.ErrTLSConfig) {
		t.Fatalf("reload of a broken key: %v", err)
	}
	if got := served(); got != second.Serial.String() {
		t.Fatalf("after a failed reload: serial %s, want %s still", got, second.Serial)
	}
}

// Test_TLSConfigRefused: what a node refuses to start with.
func Test_TLSConfigRefused(t *testing.T) {
	dir := t.TempDir()
	ca := testpki.NewCA(t, dir, "refused")
	leaf := ca.Issue(t, "n1")
	for _, tt := range []struct {
		name string
		tls  server.TLSConfig
		want string
		// join and peers, when set, are --join and --indexer-peers.
		join, peers []string
	}{
		{"no key", server.TLSConfig{CertFile: leaf.CertFile}, "both a cert file and a key file", nil, nil},
		{"missing cert", server.TLSConfig{CertFile: dir + "/nope.pem", KeyFile: leaf.KeyFile}, "no such file", nil, nil},
		{"key of another certificate", server.TLSConfig{CertFile: leaf.CertFile, KeyFile: ca.Issue(t, "n2").KeyFile}, "private key does not match", nil, nil},
		{"CA file without a certificate", server.TLSConfig{CertFile: leaf.CertFile, KeyFile: leaf.KeyFile, CAFile: leaf.KeyFile}, "no PEM certificate", nil, nil},
		// The node would send its admin token to these in clear text.
		{"plain http join", server.TLSConfig{CertFile: leaf.CertFile, KeyFile: leaf.KeyFile}, "--join names http://n2:8092",
			[]string{"https://n3:8092", "http://n2:8092"}, nil},
		{"plain http indexer peer", server.TLSConfig{CertFile: leaf.CertFile, KeyFile: leaf.KeyFile}, "--indexer-peers names HTTP://n2:8092",
			nil, []string{"n3:8092", "HTTP://n2:8092"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cfg := servertest.Config("n1", t.TempDir())
			cfg.TLS = &tt.tls
			cfg.Cluster.Join, cfg.Recovery.Peers = tt.join, tt.peers
			s, err := server.Start(cfg)
			if err == nil {
				_ = s.Close(context.Background())
				t.Fatal("started")
			}
			if !errors.Is(err, server.ErrTLSConfig) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want ErrTLSConfig saying %q", err, tt.want)
			}
		})
	}
}

// httpsClient trusts caFile and follows no redirects.
func httpsClient(t *testing.T, caFile string) *http.Client {
	t.Helper()
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = &tls.Config{RootCAs: pool(t, caFile)}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

func pool(t *testing.T, caFile string) *x509.CertPool {
	t.Helper()
	pem, err := os.ReadFile(caFile)
	if err != nil {
		t.Fatal(err)
	}
	p := x509.NewCertPool()
	if !p.AppendCertsFromPEM(pem) {
		t.Fatalf("%s holds no certificate", caFile)
	}
	return p
}

// gather is s's metrics, read from its registry.
func gather(t *testing.T, s *server.Server) scrape {
	t.Helper()
	fams, err := s.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	sc := scrape{}
	for _, f := range fams {
		sc[f.GetName()] = f
	}
	return sc
}
