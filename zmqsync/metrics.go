package zmqsync

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/kvselect/kvselect/scheduler/replica"
)

type metrics struct {
	sentMessages, sentEvents, sendDropped prometheus.Counter
	heldAdmissions                        prometheus.Counter
	receivedMessages                      prometheus.Counter
	receivedEvents                        *prometheus.CounterVec
	droppedMessages, droppedEvents        *prometheus.CounterVec
	peers                                 prometheus.Gauge
	// Freshness and anti-entropy (origin.go, antientropy.go).
	missed          prometheus.Counter
	previousVersion *prometheus.CounterVec
	liveSets        *prometheus.CounterVec
	forgotten       *prometheus.CounterVec
}

// dropMessageReasons label kvselect_replica_sync_dropped_messages_total.
var dropMessageReasons = []string{"malformed", "unknown_version", "frames", "unauthenticated", dropEcho,
	dropNotReady, dropOtherCluster, dropUnknownOrigin, dropOldEpoch, dropReplayed, dropOldVersion}

func newMetrics(dropReasons []string) *metrics {
	m := &metrics{
		sentMessages: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "kvselect_replica_sync_sent_messages_total",
			Help: "Replica-sync messages handed to the PUB socket (zmq4 drops past its queue of zmqx.PubQueue messages without saying so)."}),
		sentEvents: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "kvselect_replica_sync_sent_events_total", Help: "Lifecycle events published to the peers."}),
		heldAdmissions: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "kvselect_replica_sync_held_admissions_total",
			Help: "Admissions not queued while this node waited for its epoch; the peers ask for them once it publishes its live set."}),
		sendDropped: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "kvselect_replica_sync_send_dropped_total", Help: "Lifecycle events dropped before sending (queue full)."}),
		receivedMessages: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "kvselect_replica_sync_received_messages_total", Help: "Replica-sync messages received from the peers."}),
		receivedEvents: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kvselect_replica_sync_received_events_total", Help: "Lifecycle events received, by kind."}, []string{"kind"}),
		droppedMessages: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kvselect_replica_sync_dropped_messages_total",
			Help: "Received messages dropped whole: malformed, unknown_version, frames (not topic + payload [+ MAC]), unauthenticated (no valid MAC while this node has a token), echo (this node's own), " +
				"not_ready (v2 before this node knows the cluster id), other_cluster (another cluster's), unknown_origin (not a member), old_epoch (an earlier start of its origin), " +
				"replayed (a counter already accepted), old_version (v1 from a member that runs this release)."},
			[]string{"reason"}),
		droppedEvents: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kvselect_replica_sync_dropped_events_total",
			Help: "Received events not applied, by reason (unknown partition, rank or reservation, block size, duplicate, expired)."},
			[]string{"reason"}),
		peers: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "kvselect_replica_sync_peers", Help: "Peer endpoints this node subscribes to."}),
		missed: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "kvselect_replica_sync_missed_messages_total",
			Help: "Messages of the members that never arrived here: gaps in their counters (anti-entropy heals what they carried)."}),
		previousVersion: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kvselect_replica_sync_previous_version_messages_total",
			Help: "v1 messages received from members that may run the previous release, and v1 copies sent for them (a rolling upgrade)."},
			[]string{"direction"}),
		liveSets: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kvselect_replica_sync_live_sets_total",
			Help: "Live booking sets (anti-entropy) published by this node, and received complete from the members."},
			[]string{"direction"}),
		forgotten: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kvselect_replica_sync_forgotten_origins_total",
			Help: "Times a member's mirrored bookings were all forgotten: new_epoch (it restarted), removed_member (it left the cluster)."},
			[]string{"reason"}),
	}
	for _, k := range []replica.Kind{replica.KindAdmission, replica.KindPrefillComplete, replica.KindFree, replica.KindLive, replica.KindWant} {
		m.receivedEvents.WithLabelValues(k.String())
	}
	for _, r := range dropMessageReasons {
		m.droppedMessages.WithLabelValues(r)
	}
	for _, d := range []string{"sent", "received"} {
		m.previousVersion.WithLabelValues(d)
		m.liveSets.WithLabelValues(d)
	}
	for _, r := range []string{"new_epoch", "removed_member"} {
		m.forgotten.WithLabelValues(r)
	}
	for _, r := range append(dropReasons, departedMember) {
		m.droppedEvents.WithLabelValues(r)
	}
	return m
}

// Collectors returns the syncer's Prometheus metrics.
func (s *Syncer) Collectors() []prometheus.Collector {
	m := s.metrics
	return []prometheus.Collector{m.sentMessages, m.sentEvents, m.sendDropped, m.heldAdmissions, m.receivedMessages,
		m.receivedEvents, m.droppedMessages, m.droppedEvents, m.peers,
		m.missed, m.previousVersion, m.liveSets, m.forgotten}
}
