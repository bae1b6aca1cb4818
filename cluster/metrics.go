package cluster

import (
	"github.com/hashicorp/raft"
	"github.com/prometheus/client_golang/prometheus"
)

type metrics struct {
	leaderChanges prometheus.Counter
	leasesExpired prometheus.Counter
	applyLatency  *prometheus.HistogramVec
	collectors    []prometheus.Collector
}

func newMetrics(n *Node) *metrics {
	m := &metrics{
		leaderChanges: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "kvselect_raft_leader_changes_total", Help: "Leader changes observed by this node.",
		}),
		leasesExpired: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "kvselect_worker_leases_expired_total",
			Help: "Workers this node removed as leader because their lease lapsed (reason lease_expired).",
		}),
		applyLatency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "kvselect_catalog_apply_duration_seconds",
			Help:    "Time from submitting a catalog command to raft until it is applied here.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 14),
		}, []string{"command"}),
	}
	gauge := func(name, help string, f func() float64) prometheus.Collector {
		return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help}, f)
	}
	m.collectors = []prometheus.Collector{
		m.leaderChanges, m.leasesExpired, m.applyLatency, n.stream.refusals.counter,
		gauge("kvselect_raft_state", "Raft state: 0 follower, 1 candidate, 2 leader, 3 shutdown.",
			func() float64 { return float64(n.raft.State()) }),
		gauge("kvselect_raft_term", "Current Raft term.", func() float64 { return float64(n.raft.CurrentTerm()) }),
		gauge("kvselect_raft_commit_index", "Raft commit index.", func() float64 { return float64(n.raft.CommitIndex()) }),
		gauge("kvselect_raft_applied_index", "Raft applied index.", func() float64 { return float64(n.raft.AppliedIndex()) }),
		gauge("kvselect_catalog_index", "Catalog index whose side effects are done on this node.",
			func() float64 { return float64(n.watcher.applied()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "kvselect_raft_skipped_entries_total",
			Help: "Log entries of a type this binary does not know, flagged skippable by the newer binary that wrote them."},
			func() float64 { return float64(n.fsm.Skipped()) }),
		gauge("kvselect_raft_is_leader", "1 when this node is the leader.",
			func() float64 {
				if n.raft.State() == raft.Leader {
					return 1
				}
				return 0
			}),
	}
	return m
}

// Collectors returns the node's metrics for registration.
func (n *Node) Collectors() []prometheus.Collector { return n.metrics.collectors }
