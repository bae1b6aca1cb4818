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
		Apply: sched.ApplyPeerEvent, DropReasons: scheduler.DropReasons(), Logger: log,
		// A node accepts exactly the tokens of its file (auth.go): a
		// rotation is staged with a second line, not a grace.
		PreviousTokenGrace: -1})
}

// replicaMembers lists the members whose replica-sync endpoint the catalog
// holds, each dialed where --peer-dial says (fault-injection proxies).
func replicaMembers(c *fsm.Catalog, dial map[string]cluster.PeerDial) map[string]zmqsync.Member {
	out := map[string]zmqsync.Member{}
	for _, n := range c.Nodes() {
		if n.ReplicaSync == "" {
			continue
		}
		m := zmqsync.Member{Endpoint: n.ReplicaSync}
		if d := dial[n.ID].ReplicaSync; d != "" {
			m.Dial = "tcp://" + d
		}
		out[n.ID] = m
	}
	return out
}
