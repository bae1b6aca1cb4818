package indexer

import (
	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the indexer's Prometheus series. Counters are resolved once
// so the apply path does no label lookups.
type metrics struct {
	events        [EventCleared + 1][numOutcomes]prometheus.Counter
	eventsVec     *prometheus.CounterVec
	blocksStored  prometheus.Counter
	blocksRemoved prometheus.Counter
	blocksMissing prometheus.Counter
}

func newMetrics() *metrics {
	m := &metrics{
		eventsVec: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kvselect_kv_events_applied_total",
			Help: "KV cache events applied to the index, by event type and outcome.",
		}, []string{"type", "status"}),
		blocksStored: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "kvselect_kv_blocks_stored_total", Help: "Block memberships added to the index.",
		}),
		blocksRemoved: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "kvselect_kv_blocks_removed_total", Help: "Block memberships removed from the index.",
		}),
		blocksMissing: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "kvselect_kv_blocks_not_found_total", Help: "Removals of blocks the rank did not hold on that tier.",
		}),
	}
	for k := EventStored; k <= EventCleared; k++ {
		for o := range numOutcomes {
			m.events[k][o] = m.eventsVec.WithLabelValues(k.String(), o.String())
		}
	}
	return m
}

func (m *metrics) record(kind EventKind, o Outcome) {
	if kind >= EventStored && kind <= EventCleared {
		m.events[kind][o].Inc()
	}
}

func (m *metrics) recordStats(st *ApplyStats) {
	m.blocksStored.Add(float64(st.BlocksStored))
	m.blocksRemoved.Add(float64(st.BlocksRemoved))
	m.blocksMissing.Add(float64(st.BlocksNotFound))
}

// Collectors returns the indexer's metrics for registration, including
// gauges of blocks and memberships per partition computed at scrape time.
func (ix *Indexer) Collectors() []prometheus.Collector {
	return []prometheus.Collector{ix.metrics.eventsVec, ix.metrics.blocksStored,
		ix.metrics.blocksRemoved, ix.metrics.blocksMissing, &sizeCollector{ix}}
}

var (
	blocksDesc = prometheus.NewDesc("kvselect_index_blocks",
		"Distinct blocks (prefix-tree nodes) in the index.", []string{"model_name", "tenant_id"}, nil)
	membershipsDesc = prometheus.NewDesc("kvselect_index_memberships",
		"(block, rank) memberships in the index, by tier.", []string{"model_name", "tenant_id", "tier"}, nil)
	ranksDesc = prometheus.NewDesc("kvselect_index_ranks",
		"Worker ranks indexed.", []string{"model_name", "tenant_id"}, nil)
)

type sizeCollector struct{ ix *Indexer }

func (c *sizeCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- blocksDesc
	ch <- membershipsDesc
	ch <- ranksDesc
}

func (c *sizeCollector) Collect(ch chan<- prometheus.Metric) {
	for _, s := range c.ix.Stats() {
		m, t := s.Partition.Model, s.Partition.Tenant
		ch <- prometheus.MustNewConstMetric(blocksDesc, prometheus.GaugeValue, float64(s.Blocks), m, t)
		ch <- prometheus.MustNewConstMetric(ranksDesc, prometheus.GaugeValue, float64(s.Ranks), m, t)
		for tier := range numTiers {
			ch <- prometheus.MustNewConstMetric(membershipsDesc, prometheus.GaugeValue,
				float64(s.TierMemberships[tier]), m, t, tier.String())
		}
	}
}
