package server

import (
	"strings"
	"testing"

	"github.com/kvselect/kvselect/cluster"
)

// Test_DecideReplicaSync pins SPEC §2's rule: replica sync runs whenever
// the node has a second member, from the start when the flags say it
// will, and on a node alone only when configured; never when turned off.
func Test_DecideReplicaSync(t *testing.T) {
	auto := &ReplicaSyncConfig{Listen: "tcp://0.0.0.0:0", Auto: true}
	explicit := &ReplicaSyncConfig{Listen: "tcp://0.0.0.0:7093"}
	three := []cluster.Peer{{ID: "n1", RaftAddr: "h1:7001"}, {ID: "n2", RaftAddr: "h2:7001"}, {ID: "n3", RaftAddr: "h3:7001"}}
	alone := []cluster.Peer{{ID: "n1", RaftAddr: "h1:7001"}}
	for _, tc := range []struct {
		name    string
		rc      *ReplicaSyncConfig
		cl      cluster.Config
		members int
		on      bool
		why     string
	}{
		{"turned off", nil, cluster.Config{InitialCluster: three}, 3, false, "--replica-sync=false"},
		{"explicit port on a lone node", explicit, cluster.Config{}, 1, true, "configured"},
		{"explicit port before open", explicit, cluster.Config{}, 0, true, "configured"},
		{"default, three in --initial-cluster", auto, cluster.Config{InitialCluster: three}, 0, true, "--initial-cluster lists 3 members"},
		{"default, joining", auto, cluster.Config{Join: []string{"http://h1:8092"}}, 0, true, "--join"},
		{"default, restart with three in the Raft state", auto, cluster.Config{}, 3, true, "the Raft configuration has 3 members"},
		{"default, a second member joined", auto, cluster.Config{InitialCluster: alone}, 2, true, "the Raft configuration has 2 members"},
		{"default, no flags, before open", auto, cluster.Config{}, 0, false, "alone"},
		{"default, no flags, alone", auto, cluster.Config{}, 1, false, "alone"},
		{"default, alone in --initial-cluster", auto, cluster.Config{InitialCluster: alone}, 1, false, "alone"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			on, why := decideReplicaSync(tc.rc, tc.cl, tc.members)
			if on != tc.on || !strings.Contains(why, tc.why) {
				t.Fatalf("decideReplicaSync = %v %q, want %v and a reason with %q", on, why, tc.on, tc.why)
			}
		})
	}
}
