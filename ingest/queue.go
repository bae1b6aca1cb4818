package ingest

import (
	"encoding/binary"
	"sync"

	"github.com/go-zeromq/zmq4"
	"github.com/prometheus/client_golang/prometheus"
)

// liveQueue holds the live messages a listener's receiver has read and its
// run goroutine has not handled yet — many of them while a replay stalls.
// It is bounded in messages (Config.QueueLen) and in bytes
// (Config.QueueBytes). The receiver never waits: what does not fit is
// dropped, and the drop is kept in order, as a dropRun in front of the
// next message that fits (or at the tail), so that the run goroutine
// handles it as a gap at the place it happened (listener.dropped).
//
// The receiver pushes, the run goroutine pops; mu guards the rest.
type liveQueue struct {
	maxLen   int
	maxBytes int64
	gauge    prometheus.Gauge // bytes queued by every listener
	ready    chan struct{}    // 1-buffered: something to pop

	mu      sync.Mutex
	items   []queued
	head    int
	bytes   int64
	peak    int64   // highest bytes since the listener started
	pending dropRun // dropped after the last queued message
	// The sequence numbers the connection has delivered (queued or
	// dropped): the live stream's extent, which bounds a replay.
	first, hi uint64
	seen      bool
}

// queued is one queue entry: a message, the messages dropped right before
// it, or both.
type queued struct {
	drops  dropRun
	msg    zmq4.Msg
	size   int64
	hasMsg bool
}

// dropRun describes live messages dropped in a row because the queue was
// full: how many, and the sequence numbers of the first and last of them
// that carried one.
type dropRun struct {
	n           uint64
	first, last uint64
	hasSeq      bool
}

func (d *dropRun) add(seq uint64, ok bool) {
	d.n++
	if !ok {
		return
	}
	if !d.hasSeq {
		d.first, d.hasSeq = seq, true
	}
	d.last = seq
}

// shrinkCap is the most entries an empty queue keeps room for. A queue
// that grew past it during a stall gives its array back once it drains.
const shrinkCap = 64

func newLiveQueue(maxLen int, maxBytes int64, gauge prometheus.Gauge) *liveQueue {
	return &liveQueue{maxLen: maxLen, maxBytes: maxBytes, gauge: gauge, ready: make(chan struct{}, 1)}
}

// liveSeq returns a live message's sequence number, if it has the
// documented shape: 3 frames with an 8-byte sequence number. ff×8 ends a
// replay and is never a live message's.
func liveSeq(f [][]byte) (uint64, bool) {
	if len(f) != 3 || len(f[1]) != 8 {
		return 0, false
	}
	seq := binary.BigEndian.Uint64(f[1])
	return seq, seq != endOfReplay
}

func msgBytes(msg zmq4.Msg) int64 {
	var n int64
	for _, f := range msg.Frames {
		n += int64(len(f))
	}
	return n
}

// push queues msg, or drops it when the queue is at QueueLen messages or
// msg would take it past QueueBytes. A message larger than QueueBytes on
// its own is still queued when the queue is empty: the receiver holds it
// already, and dropping it would only force a replay of the same bytes.
// It reports whether msg was dropped.
func (q *liveQueue) push(msg zmq4.Msg) (dropped bool) {
	size := msgBytes(msg)
	seq, ok := liveSeq(msg.Frames)
	q.mu.Lock()
	if ok {
		if !q.seen {
			q.first, q.seen = seq, true
		}
		q.hi = max(q.hi, seq)
	}
	n := len(q.items) - q.head
	if n >= q.maxLen || (n > 0 && q.bytes+size > q.maxBytes) {
		q.pending.add(seq, ok)
		q.mu.Unlock()
		q.signal()
		return true
	}
	if q.head > 0 && len(q.items) == cap(q.items) {
		// Move the entries down instead of growing the array.
		k := copy(q.items, q.items[q.head:])
		clear(q.items[k:])
		q.items, q.head = q.items[:k], 0
	}
	q.items = append(q.items, queued{drops: q.pending, msg: msg, size: size, hasMsg: true})
	q.pending = dropRun{}
	q.bytes += size
	q.peak = max(q.peak, q.bytes)
	q.mu.Unlock()
	q.gauge.Add(float64(size))
	q.signal()
	return false
}

func (q *liveQueue) signal() {
	select {
	case q.ready <- struct{}{}:
	default:
	}
}

// pop takes the oldest entry; false when there is none.
func (q *liveQueue) pop() (queued, bool) {
	q.mu.Lock()
	if q.head == len(q.items) {
		e := queued{drops: q.pending}
		q.pending = dropRun{}
		q.mu.Unlock()
		return e, e.drops.n > 0
	}
	e := q.items[q.head]
	q.items[q.head] = queued{} // the frames are the run goroutine's now
	q.head++
	q.bytes -= e.size
	if q.head == len(q.items) {
		q.resetItems()
	}
	q.mu.Unlock()
	q.gauge.Sub(float64(e.size))
	return e, true
}

// resetItems empties the queue's array, giving it back when it grew large:
// a resliced array would keep its capacity for as long as the listener
// lives. Callers hold mu.
func (q *liveQueue) resetItems() {
	clear(q.items)
	if cap(q.items) > shrinkCap {
		q.items = nil
	} else {
		q.items = q.items[:0]
	}
	q.head = 0
}

// reset empties the queue for a new connection: what the last one left
// is gone with it (the new connection replays from the watermark).
func (q *liveQueue) reset() {
	q.mu.Lock()
	freed := q.bytes
	q.resetItems()
	q.bytes, q.pending = 0, dropRun{}
	q.first, q.hi, q.seen = 0, 0, false
	q.mu.Unlock()
	q.gauge.Sub(float64(freed))
	select {
	case <-q.ready:
	default:
	}
}

// liveExtent returns the first and the highest sequence number this
// connection has delivered, if any.
func (q *liveQueue) liveExtent() (first, hi uint64, ok bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.first, q.hi, q.seen
}

// usage returns the messages and bytes queued now, and the most bytes
// ever queued.
func (q *liveQueue) usage() (msgs int, bytes, peak int64) {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.items) - q.head, q.bytes, q.peak
}
