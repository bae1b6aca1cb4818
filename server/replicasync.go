package server

import (
	"fmt"
	"log/slog"
	"net"
	"time"

	"github.com/kvselect/kvselect/cluster"
	"github.com/kvselect/kvselect/fsm"
	"github.com/kvselect/kvselect/internal/authtoken"
	"github.com/kvselect/kvselect/internal/backoff"
	"github.com/kvselect/kvselect/scheduler"
	"github.com/kvselect/kvselect/scheduler/replica"
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

func (p syncPublisher) Publish(ev replica.Event) {
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
// switchCheckEvery besides, until the node stops. firstErr is a start
// that already failed (Start's try), nil if none.
//
// A start that fails (the port is taken, say) is tried again after a
// backoff, from switchCheckEvery doubling up to switchRetryMax, and
// catalog changes do not cut the wait short: a node whose port stays
// taken must not log an ERROR every second, or with every write, for as
// long as it runs. startFailures says what is logged.
func (s *Server) runReplicaSyncSwitch(firstErr error) {
	defer s.wg.Done()
	fails := newStartFailures(s.log)
	var retry <-chan time.Time
	if firstErr != nil {
		retry = s.afterFailure(fails, firstErr)
	}
	tick := time.NewTicker(switchCheckEvery)
	defer tick.Stop()
	for {
		if retry != nil {
			select {
			case <-s.stop:
				return
			case <-retry:
			}
		} else {
			select {
			case <-s.stop:
				return
			case <-s.syncKick:
			case <-tick.C:
			}
		}
		retry = nil
		on, err := s.switchReplicaSync()
		if on {
			fails.started()
			return
		}
		if err != nil {
			retry = s.afterFailure(fails, err)
		}
	}
}

// afterFailure records a failed start and returns when to try again.
func (s *Server) afterFailure(fails *startFailures, err error) <-chan time.Time {
	return time.After(fails.failed(err))
}

// switchReplicaSync starts replica sync if this node's Raft configuration
// has a second member, and reports whether it started, or why it could
// not (its caller logs that: startFailures). A stopping node starts
// nothing: once Close closed s.stop, a catalog change or a tick that the
// runner's select picks anyway must not bind a socket or advertise it.
func (s *Server) switchReplicaSync() (bool, error) {
	select {
	case <-s.stop:
		return false, nil
	default:
	}
	on, why := decideReplicaSync(s.cfg.ReplicaSync, s.cfg.Cluster, s.Node.Members())
	if !on {
		return false, nil
	}
	sy, err := startReplicaSync(s.cfg, s.Scheduler, s.auth, s.log)
	if err != nil {
		return false, fmt.Errorf("%s: %w", why, err)
	}
	s.Registry.MustRegister(sy.Collectors()...)
	s.useReplicaSync(sy)
	s.api.SetReplicaSync(sy)
	s.Node.SetReplicaSyncAdvertise(sy.Advertised())
	s.logReplicaSync(sy, why)
	return true, nil
}

// switchCheckEvery backs up the catalog changes runReplicaSyncSwitch
// wakes on: a configuration change need not come with one. It is also
// the first retry delay after a failed start.
const switchCheckEvery = time.Second

// switchRetryMax caps the delay between retries of a failed start.
const switchRetryMax = time.Minute

// startFailures logs the failed starts of replica sync: the first at
// ERROR, the repeats at DEBUG, and every tenth a WARN that sums up how
// many failed so far (backoff.Backoff's rhythm), so a node whose start
// keeps failing says so now and then without flooding the log.
type startFailures struct {
	log     *slog.Logger
	b       *backoff.Backoff
	failing bool
}

func newStartFailures(log *slog.Logger) *startFailures {
	return &startFailures{log: log, b: backoff.New(switchCheckEvery, switchRetryMax)}
}

// failed logs err and returns how long to wait before the next try.
func (f *startFailures) failed(err error) time.Duration {
	wait, n, warn := f.b.Next()
	switch {
	case !f.failing:
		f.log.Error("replica sync could not start; trying again with a backoff", "err", err, "retry_in", wait)
	case warn:
		f.log.Warn("replica sync still cannot start", "failures", n, "err", err, "retry_in", wait)
	default:
		f.log.Debug("replica sync could not start (a repeat)", "failures", n, "err", err, "retry_in", wait)
	}
	f.failing = true
	return wait
}

// started logs, after failures, how many there were.
func (f *startFailures) started() {
	if f.failing {
		f.log.Info("replica sync started after failed attempts")
	}
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
