package ingest

import "github.com/prometheus/client_golang/prometheus"

// msgStatus is what became of one sequenced message.
type msgStatus int

const (
	msgApplied          msgStatus = iota // live, in order
	msgReplayed                          // applied from a replay
	msgDuplicate                         // already applied (replay overlap)
	msgGap                               // revealed a gap (then replayed or lost)
	msgRestart                           // went backwards: engine restart
	msgDroppedMalformed                  // payload not a batch
	msgDroppedFrame                      // not 3 frames / bad sequence frame
	msgDroppedQueueFull                  // live, no room in the listener's queue (then replayed or lost)
	msgDroppedOversize                   // a frame past zmqx.MaxFrameBytes: the connection is cut
	msgReplayRejected                    // replay reply outside the asked range or out of order
	numMsgStatus
)

var msgStatusNames = [numMsgStatus]string{"applied", "replayed", "duplicate", "gap", "restart", "dropped_malformed",
	"dropped_frame", "dropped_queue_full", "dropped_oversize", "replay_rejected"}

// dropReason is why an event inside a decoded batch was not applied.
type dropReason int

const (
	dropMalformed    dropReason = iota // undecodable or inconsistent event
	dropNonMainGroup                   // event of a non-main attention group
	dropBlockSize                      // block_size differs from the partition's
	dropUnknownRank                    // dp_rank override to a rank not indexed
	numDropReasons
)

var dropReasonNames = [numDropReasons]string{"dropped_malformed", "ignored_group", "block_size_mismatch", "unknown_rank"}

const (
	replayOK = iota
	replayFailed
)

type metrics struct {
	messagesVec   *prometheus.CounterVec
	messages      [numMsgStatus]prometheus.Counter
	droppedVec    *prometheus.CounterVec
	droppedEvents [numDropReasons]prometheus.Counter
	lost          prometheus.Counter
	replaysVec    *prometheus.CounterVec
	replays       [2]prometheus.Counter
	states        *prometheus.GaugeVec
	queuedBytes   prometheus.Gauge
}

func newMetrics() *metrics {
	m := &metrics{
		messagesVec: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kvselect_kv_messages_total",
			Help: "KV event messages received from workers, by what became of them.",
		}, []string{"status"}),
		droppedVec: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kvselect_kv_events_dropped_total",
			Help: "KV events inside decoded batches that were not applied, by reason.",
		}, []string{"reason"}),
		lost: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "kvselect_kv_messages_lost_total",
			Help: "KV event messages missed (sequence gaps that no replay recovered).",
		}),
		replaysVec: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kvselect_kv_replays_total",
			Help: "Replay requests to worker replay endpoints, by result.",
		}, []string{"result"}),
		states: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "kvselect_kv_listeners",
			Help: "KV event listeners by state; stale: down longer than --stale-listener-after, not selected by this node (counted there, not as failed).",
		}, []string{"state"}),
		queuedBytes: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "kvselect_kv_queued_bytes",
			Help: "Bytes of live KV event messages queued by all listeners, not yet applied (bounded per listener).",
		}),
	}
	for i := range m.messages {
		m.messages[i] = m.messagesVec.WithLabelValues(msgStatusNames[i])
	}
	for i := range m.droppedEvents {
		m.droppedEvents[i] = m.droppedVec.WithLabelValues(dropReasonNames[i])
	}
	m.replays[replayOK] = m.replaysVec.WithLabelValues("ok")
	m.replays[replayFailed] = m.replaysVec.WithLabelValues("failed")
	for _, s := range []State{StateConnecting, StateActive, StateFailed, stateStale} {
		m.states.WithLabelValues(string(s))
	}
	return m
}

// stateChange moves one listener between state gauges. A new listener
// starts in no state ("").
func (m *metrics) stateChange(from, to State) {
	if from != "" && from != stateStopped {
		m.states.WithLabelValues(string(from)).Dec()
	}
	if to != stateStopped {
		m.states.WithLabelValues(string(to)).Inc()
	}
}

// Collectors returns the manager's metrics for registration.
func (m *Manager) Collectors() []prometheus.Collector {
	return []prometheus.Collector{m.metrics.messagesVec, m.metrics.droppedVec, m.metrics.lost,
		m.metrics.replaysVec, m.metrics.states, m.metrics.queuedBytes}
}
