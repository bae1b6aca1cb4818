package server

import (
	"fmt"
	"log/slog"
	"net"
	"time"

	"github.com/kvselect/kvselect/cluster"
	"github.com/kvselect/kvselect/fsm"
	"github.com/kvselect/kvselect/internal/authtoken"
	"github.com/kvselect/kvselect/scheduler"
	"github.com/kvselect/kvselect/zmqsync"
)

// Replica sync runs whenever this node has had a second member (SPEC §2):
// a node of a cluster shares its load without a flag, and a node alone
// keeps Dynamo's behaviour, off unless configured. decideReplicaSync says
// whether it runs and why; Start acts on what the command line tells
// (--initial-cluster, --join) before it opens Raft, so the join request
// and the first metadata already carry the endpoint; runReplicaSyncSwitch
// watches the Raft configuration of a node that starts alone and turns
// replica sync on at the first configuration with a second member. It
// never turns off again: a cluster that shrinks to one node keeps it, and
// so the same node does not flip with every member that comes and goes.

// decideReplicaSync is whether replica sync runs, and why, for
// configuration rc (nil: off) of a node with cluster configuration cl
// whose Raft configuration has members servers (0 while unknown, before
// Open). The reason is worded for the log.
func decideReplicaSync(rc *ReplicaSyncConfig, cl cluster.Config, members int) (on bool, why string) {
	switch {
	case rc == nil:
		return false, "turned off (--replica-sync=false)"
	case !rc.Auto:
		return true, "configured (--replica-sync-port or --replica-sync-peers)"
	case members > 1:
		return true, fmt.Sprintf("the Raft configuration has %d members", members)
	case len(cl.InitialCluster) > 1:
		return true, fmt.Sprintf("--initial-cluster lists %d members", len(cl.InitialCluster))
	case len(cl.Join) > 0:
		return true, "joining a cluster (--join)"
	}
	return false, "alone in its Raft configuration: replica sync starts when a second member joins (--replica-sync-port starts it now)"
}

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

// syncPublisher hands the scheduler's events to the replica-sync
// transport once there is one, and drops them before: the scheduler takes
// its publisher once, at start, and replica sync may start later. The
// bookings made meanwhile reach the peers through the first live set.
type syncPublisher struct{ s *Server }

func (p syncPublisher) Publish(ev zmqsync.Event) {
	if sy := p.s.sync.Load(); sy != nil {
		sy.Publish(ev)
	}
}

// Sync is the replica-sync transport; nil while replica sync is off.
func (s *Server) Sync() *zmqsync.Syncer { return s.sync.Load() }

// useReplicaSync makes sy this node's replica sync: the scheduler's
// events, the HTTP routes and the metrics go to it, and it learns the
// catalog this node's parts have seen last (later changes reach it
// through applyCatalogChange, in order).
func (s *Server) useReplicaSync(sy *zmqsync.Syncer) {
	s.syncMu.Lock()
	defer s.syncMu.Unlock()
	s.sync.Store(sy)
	if s.delivered != nil {
		s.Sync().SetIdentity(replicaIdentity(s.delivered, s.cfg.Cluster))
		s.Sync().SetMembers(replicaMembers(s.delivered, s.cfg.Cluster.PeerDial))
	}
}

// logReplicaSync is the one line that says whether replica sync runs,
// where, and why.
func (s *Server) logReplicaSync(sy *zmqsync.Syncer, why string) {
	if sy == nil {
		s.log.Info("replica sync off", "why", why)
		return
	}
	attrs := []any{"bound", sy.Endpoint(), "advertised", sy.Advertised(), "why", why}
	if peers := s.cfg.ReplicaSync.Peers; len(peers) > 0 {
		attrs = append(attrs, "peers", peers) // --replica-sync-peers
	}
	s.log.Info("replica sync on", attrs...)
}

// runReplicaSyncSwitch turns replica sync on once this node's Raft
// configuration has a second member (a node joined it), checking at every
// catalog change (a join writes the newcomer's metadata) and every
// switchCheckEvery besides, until the node stops.
func (s *Server) runReplicaSyncSwitch() {
	defer s.wg.Done()
	tick := time.NewTicker(switchCheckEvery)
	defer tick.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-s.syncKick:
		case <-tick.C:
		}
		if s.switchReplicaSync() {
			return
		}
	}
}

// switchReplicaSync starts replica sync if this node's Raft configuration
// has a second member, and reports whether it runs. A failed start (no
// port to bind) is logged, and tried again at the next check.
func (s *Server) switchReplicaSync() bool {
	on, why := decideReplicaSync(s.cfg.ReplicaSync, s.cfg.Cluster, s.Node.Members())
	if !on {
		return false
	}
	sy, err := startReplicaSync(s.cfg, s.Scheduler, s.auth, s.log)
	if err != nil {
		s.log.Error("replica sync could not start; trying again", "why", why, "err", err)
		return false
	}
	s.Registry.MustRegister(sy.Collectors()...)
	s.useReplicaSync(sy)
	s.api.SetReplicaSync(sy)
	s.Node.SetReplicaSyncAdvertise(sy.Advertised())
	s.logReplicaSync(sy, why)
	return true
}

// switchCheckEvery backs up the catalog changes runReplicaSyncSwitch
// wakes on: a configuration change need not come with one.
const switchCheckEvery = time.Second

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
