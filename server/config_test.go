package server_test

import (
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/kvselect/kvselect/cluster"
	"github.com/kvselect/kvselect/ingest"
	"github.com/kvselect/kvselect/scheduler"
	"github.com/kvselect/kvselect/server"
	"github.com/kvselect/kvselect/server/servertest"
)

// Test_ConfigValidate: a test node's configuration is valid, zero fields
// of the parts that default are too, and each refusal wraps the sentinel
// of the part that owns the field and names it.
func Test_ConfigValidate(t *testing.T) {
	for _, tt := range []struct {
		name   string
		mutate func(*server.Config)
		is     error // nil when valid
		want   string
	}{
		{"test node", func(*server.Config) {}, nil, ""},
		{"zero ingest and recovery", func(c *server.Config) { c.Ingest, c.Recovery = ingest.Config{}, server.RecoveryConfig{} }, nil, ""},
		{"replica sync on an OS-chosen port", func(c *server.Config) {
			c.ReplicaSync = &server.ReplicaSyncConfig{Listen: "tcp://0.0.0.0:0", Auto: true}
		}, nil, ""},
		{"HTTP port out of range", func(c *server.Config) { c.HTTPAddr = "127.0.0.1:70000" }, server.ErrInvalidConfig, "HTTPAddr (--bind, --port)"},
		{"unknown auth scope", func(c *server.Config) { c.AuthToken, c.AuthScope = "adm", "everything" }, server.ErrInvalidConfig, "AuthScope (--auth-scope)"},
		{"selection token alone", func(c *server.Config) { c.SelectionToken = "sel" }, server.ErrSelectionWithoutAdmin, "--selection-token-file needs --auth-token-file"},
		{"negative catalog wait", func(c *server.Config) { c.CatalogWait = -time.Second }, server.ErrInvalidConfig, "CatalogWait"},
		{"certificate without key", func(c *server.Config) { c.TLS = &server.TLSConfig{CertFile: "c.pem"} }, server.ErrTLSConfig, "both a cert file and a key file"},
		{"plain http join with TLS", func(c *server.Config) {
			c.TLS = &server.TLSConfig{CertFile: "c.pem", KeyFile: "k.pem"}
			c.Cluster.Join = []string{"http://n2:8092"}
		}, server.ErrTLSConfig, "--join names http://n2:8092"},
		{"ingest queue under 1 MiB", func(c *server.Config) { c.Ingest.QueueBytes = 512 }, ingest.ErrInvalidConfig, "QueueBytes (--kv-queue-bytes) must be at least 1 MiB, got 512"},
		{"negative ingest threads", func(c *server.Config) { c.Ingest.Threads = -2 }, ingest.ErrInvalidConfig, "Threads (--threads)"},
		{"one reservation", func(c *server.Config) { c.Scheduler.MaxReservations = 1 }, scheduler.ErrInvalidConfig, "MaxReservations (--max-reservations)"},
		{"zero snapshot interval", func(c *server.Config) { c.Cluster.SnapshotInterval = 0 }, cluster.ErrInvalidConfig, "SnapshotInterval (--raft-snapshot-interval)"},
		{"negative recovery wait", func(c *server.Config) { c.Recovery.MembersWait = -time.Second }, server.ErrInvalidConfig, "Recovery.MembersWait"},
		{"indexer peer not http", func(c *server.Config) { c.Recovery.Peers = []string{"ftp://n2"} }, server.ErrBadPeer, "Recovery.Peers (--indexer-peers)"},
		{"replica sync port out of range", func(c *server.Config) {
			c.ReplicaSync = &server.ReplicaSyncConfig{Listen: "tcp://0.0.0.0:70000"}
		}, server.ErrInvalidConfig, "ReplicaSync.Listen (--bind, --replica-sync-port)"},
		{"replica sync advertise without a port", func(c *server.Config) {
			c.ReplicaSync = &server.ReplicaSyncConfig{Listen: "tcp://0.0.0.0:0", Advertise: "tcp://kv-0:7093"}
		}, server.ErrInvalidConfig, "needs a port in Listen (--replica-sync-port)"},
		{"replica sync peer without a port", func(c *server.Config) {
			c.ReplicaSync = &server.ReplicaSyncConfig{Listen: "tcp://0.0.0.0:0", Peers: []string{"tcp://kv-1"}}
		}, server.ErrInvalidConfig, "ReplicaSync.Peers/Advertise"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c := servertest.Config("n1", t.TempDir())
			tt.mutate(&c)
			err := c.Validate()
			switch {
			case tt.is == nil && err != nil:
				t.Fatalf("Validate: %v", err)
			case tt.is == nil:
			case !errors.Is(err, tt.is) || !strings.Contains(err.Error(), tt.want):
				t.Fatalf("Validate = %v, want %v saying %q", err, tt.is, tt.want)
			}
		})
	}
}

// Test_StartValidates: Start fails with Validate's error before it binds
// or opens anything, and closes a Raft listener handed to it, as Open
// would.
func Test_StartValidates(t *testing.T) {
	cfg := servertest.Config("n1", t.TempDir())
	cfg.Ingest.QueueBytes = 512
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	cfg.Cluster.RaftListener = ln
	if s, err := server.Start(cfg); !errors.Is(err, ingest.ErrInvalidConfig) {
		if s != nil {
			_ = s.Crash()
		}
		t.Fatalf("Start = %v, want ingest.ErrInvalidConfig", err)
	}
	if _, err := ln.Accept(); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("the Raft listener is still open: Accept = %v", err)
	}
}
