package scheduler

import (
	"errors"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

type metrics struct {
	selections *prometheus.CounterVec
	latency    *prometheus.HistogramVec
	expired    prometheus.Counter
	rejected   prometheus.Counter
	// Replica-sync anti-entropy (antientropy.go).
	mirrorsDropped *prometheus.CounterVec
	resent         *prometheus.CounterVec
	wanted         prometheus.Counter
	aeRecordsFull  prometheus.Counter
}

func newMetrics() *metrics {
	m := &metrics{
		selections: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kvselect_selections_total",
			Help: "Selections by route (select, select_and_reserve) and outcome.",
		}, []string{"route", "outcome"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "kvselect_selection_duration_seconds",
			Help:    "Time to choose a rank (index match, cost function, booking), excluding HTTP.",
			Buckets: prometheus.ExponentialBuckets(1e-6, 2.5, 14),
		}, []string{"route"}),
		expired: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "kvselect_reservations_expired_total",
			Help: "Reservations freed by the expiry sweep.",
		}),
		// Dynamo's name (seed 001), so its dashboards and alerts work as is.
		rejected: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "dynamo_tasks_rejected_total",
			Help: "Selections rejected because every schedulable worker was busy (load shedding).",
		}),
		mirrorsDropped: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kvselect_replica_sync_mirrors_dropped_total",
			Help: "Bookings mirrored from other nodes dropped by anti-entropy: not_live (missing from the origin's live set: a lost free), old_epoch (the origin started again), removed_member (the origin left the cluster).",
		}, []string{"reason"}),
		resent: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kvselect_replica_sync_resent_events_total",
			Help: "Lifecycle events published again by anti-entropy: admission (a peer lacked it), free and prefill_complete (the origin still listed the booking as live or prefilling).",
		}, []string{"kind"}),
		wanted: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "kvselect_replica_sync_wanted_total",
			Help: "Bookings of other nodes asked for again: listed in their origin's live set but not mirrored here (a lost admission).",
		}),
		aeRecordsFull: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "kvselect_replica_sync_pending_frees_full_total",
			Help: "Frees of other nodes' bookings not remembered for anti-entropy because the store of them was full (65,536 live records).",
		}),
	}
	for _, r := range []string{mirrorNotLive, mirrorOldEpoch, mirrorRemovedMember} {
		m.mirrorsDropped.WithLabelValues(r)
	}
	for _, k := range []string{"admission", "free", "prefill_complete"} {
		m.resent.WithLabelValues(k)
	}
	return m
}

func (m *metrics) observeSelect(reserve bool, err error, d time.Duration) {
	route := "select"
	if reserve {
		route = "select_and_reserve"
	}
	outcome := "selected"
	switch {
	case errors.Is(err, ErrNotReady):
		outcome = "not_ready"
	case errors.Is(err, ErrOverloaded):
		outcome = "overloaded"
		m.rejected.Inc()
	case errors.Is(err, ErrDuplicateReservation):
		outcome = "conflict"
	case errors.Is(err, ErrCapacity):
		outcome = "capacity"
	case err != nil:
		outcome = "invalid"
	}
	m.selections.WithLabelValues(route, outcome).Inc()
	m.latency.WithLabelValues(route).Observe(d.Seconds())
}

var (
	activeRequestsDesc = prometheus.NewDesc("kvselect_active_requests",
		"Reservations booked on this node per worker rank.", []string{"model_name", "tenant_id", "worker_id", "dp_rank"}, nil)
	activePrefillDesc = prometheus.NewDesc("kvselect_active_prefill_tokens",
		"Active prefill tokens per worker rank.", []string{"model_name", "tenant_id", "worker_id", "dp_rank"}, nil)
	activeDecodeDesc = prometheus.NewDesc("kvselect_active_decode_blocks",
		"Active decode blocks per worker rank.", []string{"model_name", "tenant_id", "worker_id", "dp_rank"}, nil)
)

// LoadCollector exports active load per worker rank
// (kvselect_active_requests, kvselect_active_prefill_tokens,
// kvselect_active_decode_blocks) as loads reports it at each scrape: one
// scheduler's (a node's), or many (the slot tracker's, one per tracker).
func LoadCollector(loads func() []PartitionLoads) prometheus.Collector { return loadCollector{loads} }

type loadCollector struct{ loads func() []PartitionLoads }

func (c loadCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- activeRequestsDesc
	ch <- activePrefillDesc
	ch <- activeDecodeDesc
}

func (c loadCollector) Collect(ch chan<- prometheus.Metric) {
	for _, pl := range c.loads() {
		for _, l := range pl.Loads {
			labels := []string{pl.Partition.Model, pl.Partition.Tenant,
				strconv.FormatUint(l.WorkerID, 10), strconv.FormatUint(uint64(l.DPRank), 10)}
			ch <- prometheus.MustNewConstMetric(activeRequestsDesc, prometheus.GaugeValue, float64(l.ActiveRequests), labels...)
			ch <- prometheus.MustNewConstMetric(activePrefillDesc, prometheus.GaugeValue, float64(l.ActivePrefillTokens), labels...)
			ch <- prometheus.MustNewConstMetric(activeDecodeDesc, prometheus.GaugeValue, l.ActiveDecodeBlocks, labels...)
		}
	}
}

// Collectors returns the scheduler's metrics for registration.
func (s *Scheduler) Collectors() []prometheus.Collector {
	m := s.metrics
	return []prometheus.Collector{m.selections, m.latency, m.expired, m.rejected, LoadCollector(func() []PartitionLoads { return s.Loads("", "") }), capacityCollector{s},
		m.mirrorsDropped, m.resent, m.wanted, m.aeRecordsFull}
}
