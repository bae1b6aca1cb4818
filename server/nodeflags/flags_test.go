package nodeflags

import (
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	httpd "github.com/kvselect/kvselect/http"
	"github.com/kvselect/kvselect/internal/authtoken"
	"github.com/kvselect/kvselect/internal/envflag"
)

func Test_ParseConfigPrecedence(t *testing.T) {
	t.Run("defaults", func(t *testing.T) {
		cfg, err := Parse(nil)
		if err != nil {
			t.Fatal(err)
		}
		if cfg.HTTPAddr != "0.0.0.0:8092" || cfg.Cluster.RaftBind != "127.0.0.1:7092" ||
			cfg.Cluster.RaftAdvertise != "127.0.0.1:7092" || cfg.Cluster.DataDir != "./kvselect-data" ||
			cfg.Scheduler.Policy.Name != "dynamo-default" || len(cfg.Scheduler.Policy.Params) != 0 || cfg.Scheduler.ActiveRequestExpiry != 300*time.Second ||
			cfg.Scheduler.MaxReservations != 1<<17 || cfg.Scheduler.MaxReservedBlocks != 1<<22 {
			t.Fatalf("defaults = %+v", cfg)
		}
	})
	t.Run("environment", func(t *testing.T) {
		t.Setenv("KVSELECT_PORT", "9000")
		t.Setenv("KVSELECT_RAFT_ADDR", "127.0.0.1:9100")
		t.Setenv("DYN_KV_OVERLAP_SCORE_WEIGHT", "2.5")
		t.Setenv("DYN_ROUTER_TEMPERATURE", "0.5")
		t.Setenv("KVSELECT_ROUTER_TEMPERATURE", "0.25") // KVSELECT_ wins over DYN_
		t.Setenv("DYN_ROUTER_KV_OVERLAP_SCORE_CREDIT", "0.5")
		t.Setenv("DYN_ROUTER_ASSUME_KV_REUSE", "false")
		cfg, err := Parse([]string{"--port", "9001"})
		if err != nil {
			t.Fatal(err)
		}
		if cfg.HTTPAddr != "0.0.0.0:9001" { // the command line wins
			t.Fatalf("http addr = %s", cfg.HTTPAddr)
		}
		want := map[string]float64{"overlap_score_weight": 2.5, "router_temperature": 0.25, "overlap_score_credit": 0.5}
		if cfg.Cluster.RaftBind != "127.0.0.1:9100" || !maps.Equal(cfg.Scheduler.Policy.Params, want) || cfg.Scheduler.AssumeKVReuse {
			t.Fatalf("env not applied: %+v %+v", cfg.Cluster, cfg.Scheduler)
		}
	})
	t.Run("policy", func(t *testing.T) {
		cfg, err := Parse([]string{"--policy", "two-tier"})
		if err != nil || cfg.Scheduler.Policy.Name != "two-tier" {
			t.Fatalf("--policy two-tier = %+v %v", cfg.Scheduler.Policy, err)
		}
		for _, args := range [][]string{
			{"--policy", "fastest"},                                 // unknown policy
			{"--policy", "two-tier", "--overlap-score-credit", "2"}, // a parameter two-tier does not take
			{"--prefill-load-scale", "-1"},                          // out of range
			{"--predicted-ttft-default-tokens-per-s", "0"},          // not positive
		} {
			if _, err := Parse(args); err == nil {
				t.Errorf("%q accepted", args)
			}
		}
	})
	t.Run("token file", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "token")
		if err := os.WriteFile(path, []byte("abc\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		cfg, err := Parse([]string{"--auth-token-file", path})
		if err != nil || cfg.AuthToken != "abc" || cfg.AuthScope != httpd.ScopeAll {
			t.Fatalf("token config = %q %q %v", cfg.AuthToken, cfg.AuthScope, err)
		}
		cfg, err = Parse([]string{"--auth-token-file", path, "--auth-scope", "admin"})
		if err != nil || cfg.AuthScope != httpd.ScopeAdmin {
			t.Fatalf("--auth-scope admin = %q %v", cfg.AuthScope, err)
		}
	})
	t.Run("cluster flags", func(t *testing.T) {
		t.Setenv("KVSELECT_JOIN", "http://10.0.0.1:8092, http://10.0.0.2:8092")
		cfg, err := Parse([]string{"--peer-dial", "n2=127.0.0.1:9101/127.0.0.1:9201", "--leader-wait", "2s"})
		if err != nil {
			t.Fatal(err)
		}
		if len(cfg.Cluster.Join) != 2 || cfg.Cluster.Join[1] != "http://10.0.0.2:8092" ||
			cfg.Cluster.PeerDial["n2"].HTTP != "127.0.0.1:9201" || cfg.Cluster.LeaderWait != 2*time.Second {
			t.Fatalf("cluster config = %+v", cfg.Cluster)
		}
		cfg, err = Parse([]string{"--kv-dial", "127.0.0.1:5557=127.0.0.1:6001"})
		if err != nil || cfg.Ingest.Dial["127.0.0.1:5557"] != "127.0.0.1:6001" {
			t.Fatalf("kv dial = %v, %v", cfg.Ingest.Dial, err)
		}
		cfg, err = Parse([]string{"--max-reservations", "10", "--max-reserved-blocks", "640"})
		if err != nil || cfg.Scheduler.MaxReservations != 10 || cfg.Scheduler.MaxReservedBlocks != 640 {
			t.Fatalf("bounds = %d %d, %v", cfg.Scheduler.MaxReservations, cfg.Scheduler.MaxReservedBlocks, err)
		}
	})
	t.Run("initial cluster", func(t *testing.T) {
		cfg, err := Parse([]string{"--initial-cluster", "a=h1:7000,b=h2:7000"})
		if err != nil || len(cfg.Cluster.InitialCluster) != 2 || cfg.Cluster.InitialCluster[1].RaftAddr != "h2:7000" {
			t.Fatalf("initial cluster = %+v, %v", cfg.Cluster.InitialCluster, err)
		}
		// Parse checks the Config as server.Start would.
		if _, err := Parse([]string{"--initial-cluster", "a=h1:7000", "--join", "http://h2:8092"}); err == nil ||
			!strings.Contains(err.Error(), "not both") {
			t.Fatalf("--initial-cluster with --join: err = %v", err)
		}
	})
	for _, bad := range [][]string{
		{"--auth-scope", "some"}, {"--auth-scope", ""}, {"--log-level", "loud"}, {"--log-format", "xml"}, {"stray"},
		{"--initial-cluster", "n1"}, {"--initial-cluster", "n1=0.0.0.0:7000"}, {"--peer-dial", "n2=a/b/c/d"},
		{"--kv-dial", "127.0.0.1:5557"}, {"--max-reservations", "1"}, {"--max-reserved-blocks", "0"},
		{"--max-reservations", "-5"},
	} {
		t.Run("rejects "+strings.Join(bad, " "), func(t *testing.T) {
			if _, err := Parse(bad); err == nil {
				t.Fatal("accepted")
			}
		})
	}
	for _, v := range []string{"eighty", "99999", "-1"} {
		t.Run("bad environment KVSELECT_PORT="+v, func(t *testing.T) {
			t.Setenv("KVSELECT_PORT", v)
			if _, err := Parse(nil); err == nil || !strings.Contains(err.Error(), "KVSELECT_PORT") ||
				!strings.Contains(err.Error(), "--port") {
				t.Fatalf("err = %v", err)
			}
		})
	}
}

func Test_IndexerPeersFlag(t *testing.T) {
	for _, tc := range []struct {
		name, env string
		args      []string
		want      []string
		err       bool
	}{
		{name: "none", want: nil},
		{name: "flag", args: []string{"--indexer-peers", "http://a:8092/, b:8092"}, want: []string{"http://a:8092", "http://b:8092"}},
		{name: "environment", env: "https://c:1", want: []string{"https://c:1"}},
		{name: "not http", args: []string{"--indexer-peers", "tcp://a:1"}, err: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.env != "" {
				t.Setenv("KVSELECT_INDEXER_PEERS", tc.env)
			}
			cfg, err := Parse(tc.args)
			if tc.err {
				if err == nil || !strings.Contains(err.Error(), "--indexer-peers") {
					t.Fatalf("err = %v", err)
				}
				return
			}
			if err != nil || strings.Join(cfg.Recovery.Peers, " ") != strings.Join(tc.want, " ") {
				t.Fatalf("peers = %q, %v; want %q", cfg.Recovery.Peers, err, tc.want)
			}
		})
	}
}

// Test_AuthTokenFile: a token file that cannot be used stops the start
// with an error that names the flag, its variable, the file and the
// problem, never the token (SPEC §11). The same checks apply to
// --selection-token-file.
func Test_AuthTokenFile(t *testing.T) {
	dir := t.TempDir()
	file := func(name, content string, mode os.FileMode) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(path, mode); err != nil { // past the umask
			t.Fatal(err)
		}
		return path
	}
	type test struct {
		name, path  string
		token, also string // wanted on success
		problem     string // wanted in the error
		notAsRoot   bool   // root reads the file whatever its mode: skip
	}
	tests := []test{
		{name: "token", path: file("ok", "s3cret\n", 0o600), token: "s3cret"},
		{name: "two lines: a rotation", path: file("two", "s3cret\ns3cret-old\n", 0o600), token: "s3cret", also: "s3cret-old"},
		{name: "missing", path: filepath.Join(dir, "missing"), problem: "no such file"},
		{name: "empty", path: file("empty", "", 0o600), problem: "is empty"},
		{name: "white space only", path: file("blank", "  \n\n", 0o600), problem: "is empty"},
		{name: "world-writable", path: file("ww", "s3cret", 0o646), problem: "world-writable"},
		{name: "unreadable: a directory", path: dir, problem: "is a directory"},
		{name: "unreadable: no permission", path: file("noperm", "s3cret", 0o000), problem: "permission denied", notAsRoot: true},
		{name: "not for a header", path: file("ctl", "s3c\x01ret", 0o600), problem: "cannot go in an HTTP header"},
		{name: "two tokens on a line", path: file("spaced", "one two", 0o600), problem: "cannot go in an HTTP header"},
		{name: "three lines", path: file("three", "s3cret\nb\nc", 0o600), problem: "has 3 lines"},
	}
	// The read itself fails, for root too (CI runs as root).
	if path, problem, ok := authtoken.UnreadableForRoot(); ok {
		tests = append(tests, test{name: "unreadable: the read fails", path: path, problem: problem})
	}
	for _, flag := range []string{"auth-token-file", "selection-token-file"} {
		for _, tt := range tests {
			t.Run(flag+"/"+tt.name, func(t *testing.T) {
				if tt.notAsRoot && os.Geteuid() == 0 {
					t.Skip("root reads the file whatever its mode; the read-fails case stands in for it")
				}
				args := []string{"--" + flag, tt.path}
				if flag == "selection-token-file" {
					args = append(args, "--auth-token-file", file("admin", "admin-token", 0o600))
				}
				cfg, err := Parse(args)
				got, also, from := cfg.AuthToken, cfg.AuthTokenAlso, cfg.AuthTokenFile
				if flag == "selection-token-file" {
					got, also, from = cfg.SelectionToken, cfg.SelectionTokenAlso, cfg.SelectionTokenFile
				}
				if tt.problem == "" {
					if err != nil || got != tt.token || also != tt.also || from != tt.path {
						t.Fatalf("tokens %q, %q from %q, %v", got, also, from, err)
					}
					return
				}
				if err == nil {
					t.Fatalf("accepted %s", tt.path)
				}
				for _, want := range []string{"--" + flag, envflag.Name("KVSELECT", flag), tt.path, tt.problem} {
					if !strings.Contains(err.Error(), want) {
						t.Errorf("error %q does not say %q", err, want)
					}
				}
				if strings.Contains(err.Error(), "s3cret") {
					t.Errorf("error %q quotes the token", err)
				}
			})
		}
	}
}

// Test_AuthAndTLSFlags: the combinations the node refuses, and what the
// TLS flags make of a bare --indexer-peers address.
func Test_AuthAndTLSFlags(t *testing.T) {
	dir := t.TempDir()
	admin, selection := filepath.Join(dir, "admin"), filepath.Join(dir, "selection")
	for path, token := range map[string]string{admin: "admin-token", selection: "sel-token"} {
		if err := os.WriteFile(path, []byte(token), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	for _, tt := range []struct {
		name    string
		args    []string
		problem string // "" accepted
	}{
		{"selection token without an admin token", []string{"--selection-token-file", selection}, "needs --auth-token-file"},
		{"both tokens", []string{"--auth-token-file", admin, "--selection-token-file", selection}, ""},
		{"cert without key", []string{"--tls-cert-file", "c.pem"}, "go together"},
		{"key without cert", []string{"--tls-key-file", "k.pem"}, "go together"},
		{"CA without a certificate", []string{"--tls-ca-file", "ca.pem"}, "--tls-ca-file needs --tls-cert-file"},
		{"TLS", []string{"--tls-cert-file", "c.pem", "--tls-key-file", "k.pem", "--tls-ca-file", "ca.pem"}, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse(tt.args)
			if tt.problem == "" && err != nil || tt.problem != "" && (err == nil || !strings.Contains(err.Error(), tt.problem)) {
				t.Fatalf("Parse(%q) = %v, want %q", tt.args, err, tt.problem)
			}
		})
	}
	cfg, err := Parse([]string{"--tls-cert-file", "c.pem", "--tls-key-file", "k.pem", "--indexer-peers", "a:8092,https://b:8092"})
	if err != nil || cfg.TLS == nil || cfg.TLS.CertFile != "c.pem" || strings.Join(cfg.Recovery.Peers, " ") != "https://a:8092 https://b:8092" {
		t.Fatalf("TLS config %+v, peers %q, %v", cfg.TLS, cfg.Recovery.Peers, err)
	}
	// A plain http peer would be sent the admin token in clear text.
	if _, err := Parse([]string{"--tls-cert-file", "c.pem", "--tls-key-file", "k.pem", "--indexer-peers", "http://b:8092"}); err == nil ||
		!strings.Contains(err.Error(), "clear text") {
		t.Fatalf("http peer on an HTTPS node: err = %v", err)
	}
}
