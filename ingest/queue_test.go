package ingest

import (
	"slices"
	"testing"

	"github.com/go-zeromq/zmq4"
	"github.com/prometheus/client_golang/prometheus"
)

// sizedMsg is a well-formed live message of exactly size bytes (size >= 8):
// an empty topic, the sequence number, and padding.
func sizedMsg(seq uint64, size int) zmq4.Msg {
	return zmq4.NewMsgFrom([]byte{}, be8(seq), make([]byte, size-8))
}

// gather reads one series from collectors as a scrape would: the metric
// name and the value of its only label ("" when it has none).
func gather(t testing.TB, c []prometheus.Collector, name, label string) float64 {
	t.Helper()
	reg := prometheus.NewRegistry()
	reg.MustRegister(c...)
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range families {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			if lp := m.GetLabel(); (label == "" && len(lp) == 0) || (len(lp) == 1 && lp[0].GetValue() == label) {
				if c := m.GetCounter(); c != nil {
					return c.GetValue()
				}
				return m.GetGauge().GetValue()
			}
		}
	}
	t.Fatalf("%s{%s} not exported", name, label)
	return 0
}

func newTestQueue(maxLen int, maxBytes int64) (*liveQueue, []prometheus.Collector) {
	g := prometheus.NewGauge(prometheus.GaugeOpts{Name: "test_queued_bytes"})
	return newLiveQueue(maxLen, maxBytes, g), []prometheus.Collector{g}
}

// popAll drains q, returning the queued sequence numbers in order and the
// drop runs as they came.
func popAll(t *testing.T, q *liveQueue) (seqs []uint64, drops []dropRun) {
	t.Helper()
	for {
		e, ok := q.pop()
		if !ok {
			return seqs, drops
		}
		if e.drops.n > 0 {
			drops = append(drops, e.drops)
		}
		if e.hasMsg {
			seq, _ := liveSeq(e.msg.Frames)
			seqs = append(seqs, seq)
		}
	}
}

func TestLiveQueueDropsPastItsBounds(t *testing.T) {
	tests := []struct {
		name      string
		maxLen    int
		maxBytes  int64
		sizes     []int // bytes of the messages pushed, with sequence numbers 0, 1, ...
		wantSeqs  []uint64
		wantDrops []dropRun
	}{
		{"under both bounds", 4, 1000, []int{100, 100, 100}, []uint64{0, 1, 2}, nil},
		{"message bound", 2, 1000, []int{10, 10, 10, 10}, []uint64{0, 1},
			[]dropRun{{n: 2, first: 2, last: 3, hasSeq: true}}},
		{"byte bound, then room again", 10, 250, []int{100, 100, 100, 10}, []uint64{0, 1, 3},
			[]dropRun{{n: 1, first: 2, last: 2, hasSeq: true}}},
		{"a message larger than the bound fits an empty queue only", 10, 50, []int{100, 10, 20}, []uint64{0},
			[]dropRun{{n: 2, first: 1, last: 2, hasSeq: true}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			q, g := newTestQueue(tt.maxLen, tt.maxBytes)
			var want int64
			for i, size := range tt.sizes {
				dropped := q.push(sizedMsg(uint64(i), size))
				if !dropped {
					want += int64(size)
				}
				n, bytes, peak := q.usage()
				if n > tt.maxLen || (n > 1 && bytes > tt.maxBytes) || bytes != want || peak < bytes {
					t.Fatalf("after push %d: %d messages, %d bytes (peak %d), want %d bytes within %d/%d",
						i, n, bytes, peak, want, tt.maxLen, tt.maxBytes)
				}
				if got := gather(t, g, "test_queued_bytes", ""); got != float64(want) {
					t.Fatalf("gauge %v, want %d", got, want)
				}
			}
			seqs, drops := popAll(t, q)
			if !slices.Equal(seqs, tt.wantSeqs) || !slices.Equal(drops, tt.wantDrops) {
				t.Fatalf("popped %v, drops %+v; want %v, %+v", seqs, drops, tt.wantSeqs, tt.wantDrops)
			}
			if n, bytes, _ := q.usage(); n != 0 || bytes != 0 || gather(t, g, "test_queued_bytes", "") != 0 {
				t.Fatalf("drained queue holds %d messages, %d bytes, gauge %v", n, bytes, gather(t, g, "test_queued_bytes", ""))
			}
		})
	}
}

// TestLiveQueueLetsGoOfFrames: a drained queue holds no frames, and an
// array that grew during a stall is given back, not kept resliced.
func TestLiveQueueLetsGoOfFrames(t *testing.T) {
	q, _ := newTestQueue(4096, 1<<30)
	for seq := range uint64(1000) {
		q.push(sizedMsg(seq, 64))
	}
	if cap(q.items) <= shrinkCap {
		t.Fatalf("queue array of %d entries; the test wants one past shrinkCap", cap(q.items))
	}
	popAll(t, q)
	if q.items != nil {
		t.Fatalf("drained queue keeps an array of %d entries", cap(q.items))
	}

	// Steady state: a queue that never quite empties moves its entries
	// down instead of growing, and clears every slot it leaves.
	for seq := range uint64(1000) {
		q.push(sizedMsg(seq, 64))
		if n, _, _ := q.usage(); n > 2 {
			q.pop()
		}
	}
	if cap(q.items) > shrinkCap {
		t.Fatalf("a queue of 2 grew to %d entries", cap(q.items))
	}
	for i, e := range q.items[:cap(q.items)] {
		if i >= q.head && i < len(q.items) {
			continue
		}
		if e.hasMsg || e.msg.Frames != nil {
			t.Fatalf("slot %d outside the queue still holds a message", i)
		}
	}
	popAll(t, q)
	for i, e := range q.items[:cap(q.items)] {
		if e.hasMsg || e.msg.Frames != nil {
			t.Fatalf("slot %d of the drained queue still holds a message", i)
		}
	}
}
