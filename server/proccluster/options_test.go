package proccluster

import (
	"strings"
	"testing"
	"time"

	"github.com/kvselect/kvselect/api"
)

// Test_NodeOptionsArgs: the one function that writes kvselect's flags
// leaves zero fields out, puts Extra last, and kvselect's own definitions
// judge the result.
func Test_NodeOptionsArgs(t *testing.T) {
	tests := []struct {
		name    string
		o       NodeOptions
		want    string // the command line
		wantErr string // part of CheckedArgs' error
	}{
		{name: "zero", o: NodeOptions{}, want: ""},
		{name: "a node of a cluster", o: NodeOptions{ID: "n1", Bind: "127.0.0.1", HTTPPort: 9000, RaftAddr: "127.0.0.1:9001",
			DataDir: "/d/n1", InitialCluster: []string{"n1=127.0.0.1:9001", "n2=127.0.0.1:9002"}, ReplicaSyncPort: 9003},
			want: "--node-id n1 --bind 127.0.0.1 --port 9000 --raft-addr 127.0.0.1:9001 --data-dir /d/n1 " +
				"--initial-cluster n1=127.0.0.1:9001,n2=127.0.0.1:9002 --replica-sync-port 9003"},
		{name: "timings", o: NodeOptions{ElectionTimeout: time.Second, SnapshotThreshold: 128, SnapshotInterval: time.Second,
			TrailingLogs: 64, ActiveRequestExpiry: time.Hour, LogLevel: "info"},
			want: "--raft-heartbeat-timeout 1s --raft-election-timeout 1s --raft-leader-lease-timeout 500ms " +
				"--raft-snapshot-threshold 128 --raft-snapshot-interval 1s --raft-trailing-logs 64 " +
				"--active-request-expiry-secs 3600 --log-level info"},
		{name: "dials and extra last", o: NodeOptions{PeerDial: []string{"n2=a:1/a:2/a:3"}, KVDial: []string{"w:1=p:1", "w:2=p:2"},
			Extra: []string{"--log-level", "debug"}},
			want: "--peer-dial n2=a:1/a:2/a:3 --kv-dial w:1=p:1,w:2=p:2 --log-level debug"},
		{name: "a flag kvselect does not have", o: NodeOptions{Extra: []string{"--raft-trailing-log", "1"}},
			want: "--raft-trailing-log 1", wantErr: "unknown flag --raft-trailing-log"},
		{name: "a value kvselect refuses", o: NodeOptions{AuthScope: "some"},
			want: "--auth-scope some", wantErr: "--auth-scope"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := strings.Join(tt.o.Args(), " "); got != tt.want {
				t.Fatalf("Args = %s\nwant   %s", got, tt.want)
			}
			_, err := tt.o.CheckedArgs()
			if tt.wantErr == "" && err != nil || tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)) {
				t.Fatalf("CheckedArgs: %v, want %q", err, tt.wantErr)
			}
		})
	}
}

// Test_WorkerAddrs: every rank's event stream, then its replay endpoint
// (the port after the worker's, per rank), in rank order.
func Test_WorkerAddrs(t *testing.T) {
	regs := []api.WorkerFields{{
		WorkerID:          api.Ptr(uint64(7)),
		KVEventsEndpoints: &map[uint32]string{1: "tcp://127.0.0.1:5001", 0: "tcp://127.0.0.1:5000"},
		ReplayEndpoint:    api.Ptr("tcp://127.0.0.1:6000"),
	}}
	got, err := WorkerAddrs(regs)
	if err != nil {
		t.Fatal(err)
	}
	var parts []string
	for _, a := range got {
		parts = append(parts, a.Kind+"@"+a.Addr)
	}
	if len(got) != 4 || got[0].Rank != 0 || got[2].Rank != 1 || parts[0] != "kv@127.0.0.1:5000" || parts[2] != "kv@127.0.0.1:5001" ||
		got[1].Kind != KindReplay || got[3].Kind != KindReplay {
		t.Fatalf("WorkerAddrs = %v", parts)
	}
	if _, err := WorkerAddrs([]api.WorkerFields{{}}); err == nil {
		t.Fatal("a registration without an id was accepted")
	}
}
