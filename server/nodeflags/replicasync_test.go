package nodeflags

import (
	"strings"
	"testing"

	"github.com/kvselect/kvselect/server"
)

// Test_ReplicaSyncFlags: replica sync is on by default, on a port the OS
// chooses, once the node has a second member (Auto); a named port or a
// peer list turns it on from the start; --replica-sync=false (or
// KVSELECT_REPLICA_SYNC=false) turns it off, and contradicting flags are
// refused rather than one of them ignored.
func Test_ReplicaSyncFlags(t *testing.T) {
	for _, tc := range []struct {
		name string
		env  map[string]string
		args []string
		want *server.ReplicaSyncConfig // nil: off
		err  string                    // part of the error; "" for none
	}{
		{name: "default", want: &server.ReplicaSyncConfig{Listen: "tcp://0.0.0.0:0", Auto: true}},
		{name: "port 0 is the default", args: []string{"--bind", "127.0.0.1", "--replica-sync-port", "0"},
			want: &server.ReplicaSyncConfig{Listen: "tcp://127.0.0.1:0", Auto: true}},
		{name: "named port", args: []string{"--replica-sync-port", "7093", "--replica-sync-advertise", "tcp://kv-0:7093"},
			want: &server.ReplicaSyncConfig{Listen: "tcp://0.0.0.0:7093", Advertise: "tcp://kv-0:7093"}},
		{name: "peers", args: []string{"--replica-sync-peers", "tcp://d:5600"},
			want: &server.ReplicaSyncConfig{Listen: "tcp://0.0.0.0:0", Peers: []string{"tcp://d:5600"}}},
		{name: "port from the environment", env: map[string]string{"KVSELECT_REPLICA_SYNC_PORT": "7093"},
			want: &server.ReplicaSyncConfig{Listen: "tcp://0.0.0.0:7093"}},
		{name: "off", args: []string{"--replica-sync=false"}},
		{name: "off from the environment", env: map[string]string{"KVSELECT_REPLICA_SYNC": "false"}},
		{name: "the command line wins", env: map[string]string{"KVSELECT_REPLICA_SYNC": "false"}, args: []string{"--replica-sync"},
			want: &server.ReplicaSyncConfig{Listen: "tcp://0.0.0.0:0", Auto: true}},
		{name: "off with a port", args: []string{"--replica-sync=false", "--replica-sync-port", "7093"}, err: "--replica-sync=false"},
		{name: "off with peers", args: []string{"--replica-sync=false", "--replica-sync-peers", "tcp://d:5600"}, err: "--replica-sync=false"},
		{name: "off from the environment with a port", env: map[string]string{"KVSELECT_REPLICA_SYNC": "false", "KVSELECT_REPLICA_SYNC_PORT": "7093"},
			err: "KVSELECT_REPLICA_SYNC"},
		{name: "advertise without a port", args: []string{"--replica-sync-advertise", "tcp://kv-0:7093"}, err: "needs --replica-sync-port"},
		{name: "port out of range", args: []string{"--replica-sync-port", "70000"}, err: "--replica-sync-port"},
		{name: "negative port", args: []string{"--replica-sync-port", "-1"}, err: "--replica-sync-port"},
		{name: "bad peer", args: []string{"--replica-sync-peers", "udp://d:5600"}, err: "--replica-sync-peers"},
		{name: "not a boolean", env: map[string]string{"KVSELECT_REPLICA_SYNC": "sometimes"}, err: "KVSELECT_REPLICA_SYNC"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			cfg, err := Parse(tc.args)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err = %v, want one that names %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got, want := cfg.ReplicaSync, tc.want
			if (got == nil) != (want == nil) {
				t.Fatalf("replica sync = %+v, want %+v", got, want)
			}
			if got != nil && (got.Listen != want.Listen || got.Advertise != want.Advertise || got.Auto != want.Auto ||
				strings.Join(got.Peers, ",") != strings.Join(want.Peers, ",")) {
				t.Fatalf("replica sync = %+v, want %+v", *got, *want)
			}
		})
	}
}
