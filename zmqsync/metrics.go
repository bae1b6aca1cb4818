package zmqsync

import "github.com/prometheus/client_golang/prometheus"

type metrics struct {
	sentMessages, sentEvents, sendDropped prometheus.Counter
	receivedMessages                      prometheus.Counter
	receivedEvents                        *prometheus.CounterVec
	droppedMessages, droppedEvents        *prometheus.CounterVec
	peers                                 prometheus.Gauge
}

func newMetrics(dropReasons []string) *metrics {
	m := &metrics{
		sentMessages: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "kvselect_replica_sync_sent_messages_total",
			Help: "Replica-sync messages handed to the PUB socket (zmq4 drops past its queue of zmqx.PubQueue messages without saying so)."}),
		sentEvents: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "kvselect_replica_sync_sent_events_total", Help: "Lifecycle events published to the peers."}),
		sendDropped: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "kvselect_replica_sync_send_dropped_total", Help: "Lifecycle events dropped before sending (queue full)."}),
		receivedMessages: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "kvselect_replica_sync_received_messages_total", Help: "Replica-sync messages received from the peers."}),
		receivedEvents: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kvselect_replica_sync_received_events_total", Help: "Lifecycle events received, by kind."}, []string{"kind"}),
		droppedMessages: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kvselect_replica_sync_dropped_messages_total",
			Help: "Received messages dropped whole: malformed, unknown_version, frames (not topic + payload [+ MAC]), unauthenticated (no valid MAC while this node has a token), echo (this node's own)."},
			[]string{"reason"}),
		droppedEvents: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kvselect_replica_sync_dropped_events_total",
			Help: "Received events not applied, by reason (unknown partition, rank or reservation, block size, duplicate, expired)."},
			[]string{"reason"}),
		peers: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "kvselect_replica_sync_peers", Help: "Peer endpoints this node subscribes to."}),
	}
	for _, k := range []Kind{KindAdmission, KindPrefillComplete, KindFree} {
		m.receivedEvents.WithLabelValues(k.String())
	}
	for _, r := range []string{"malformed", "unknown_version", "frames", "unauthenticated", "echo"} {
		m.droppedMessages.WithLabelValues(r)
	}
	for _, r := range dropReasons {
		m.droppedEvents.WithLabelValues(r)
	}
	return m
}

// Collectors returns the syncer's Prometheus metrics.
func (s *Syncer) Collectors() []prometheus.Collector {
	m := s.metrics
	return []prometheus.Collector{m.sentMessages, m.sentEvents, m.sendDropped, m.receivedMessages,
		m.receivedEvents, m.droppedMessages, m.droppedEvents, m.peers}
}
