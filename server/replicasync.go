package server

import (
	"fmt"
	"log/slog"
	"net"

	"github.com/kvselect/kvselect/cluster"
	"github.com/kvselect/kvselect/fsm"
	"github.com/kvselect/kvselect/internal/authtoken"
	"github.com/kvselect/kvselect/scheduler"
	"github.com/kvselect/kvselect/zmqsync"
)

// startReplicaSync binds the node's replica-sync PUB socket. It advertises
// --replica-sync-advertise, else the host the other nodes reach this
// node's HTTP API at with the bound port (SPEC §2), so a wildcard bind
// never advertises 0.0.0.0.
func startReplicaSync(cfg Config, sched *scheduler.Scheduler, auth *authtoken.Holder, log *slog.Logger) (*zmqsync.Syncer, error) {
	rc := cfg.ReplicaSync
	host, _, err := net.SplitHostPort(cfg.Cluster.HTTPAdvertise)
	if err != nil && rc.Advertise == "" {
		return nil, fmt.Errorf("replica sync: no host to advertise in %q: %w", cfg.Cluster.HTTPAdvertise, err)
	}
	return zmqsync.Start(zmqsync.Config{NodeID: cfg.Cluster.NodeID, Listen: rc.Listen,
		Advertise: rc.Advertise, AdvertiseHost: host, Peers: rc.Peers, Auth: auth,
		Apply: sched.ApplyPeerEvent, DropReasons: scheduler.DropReasons(),
		Forget: func(origin string, before uint64) { sched.ForgetMirrors(origin, before) },
		Live:   sched.LiveBookings, AntiEntropyPeriod: rc.AntiEntropyPeriod, Logger: log,
		// A node accepts exactly the tokens of its file (auth.go): a
		// rotation is staged with a second line, not a grace.
		PreviousTokenGrace: -1})
}

// replicaMembers lists every member of the catalog with its epoch and, when
// the catalog holds one, its replica-sync endpoint, dialed where
// --peer-dial says (fault-injection proxies). Members without an endpoint
// are listed too: replica sync accepts messages from members only.
func replicaMembers(c *fsm.Catalog, dial map[string]cluster.PeerDial) map[string]zmqsync.Member {
	out := map[string]zmqsync.Member{}
	for _, n := range c.Nodes() {
		m := zmqsync.Member{Endpoint: n.ReplicaSync, Epoch: n.Epoch}
		if d := dial[n.ID].ReplicaSync; d != "" && n.ReplicaSync != "" {
			m.Dial = "tcp://" + d
		}
		out[n.ID] = m
	}
	return out
}

// replicaIdentity is the cluster id and this process's epoch in catalog c.
func replicaIdentity(c *fsm.Catalog, cfg cluster.Config) zmqsync.Identity {
	return zmqsync.Identity{ClusterID: zmqsync.ClusterID(c.ClusterID()),
		Epoch: cluster.EpochOf(c, cfg.NodeID, cfg.Incarnation)}
}
