package ingest

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/go-zeromq/zmq4"

	"github.com/kvselect/kvselect/indexer"
	"github.com/kvselect/kvselect/internal/backoff"
	"github.com/kvselect/kvselect/internal/zmqx"
)

// spec is what a listener is started with. Any change restarts it.
type spec struct {
	rk       indexer.RankKey
	endpoint string // the rank's KV events endpoint
	replay   string // the rank's replay endpoint; "" when the worker has none
}

// listener follows one (worker, rank) KV event stream. One goroutine (run)
// owns the sequence state; a second one per connection only receives.
type listener struct {
	spec spec
	m    *Manager
	log  *slog.Logger

	// cancel is set by start, under the manager's lock; a listener the
	// manager holds (Config.Hold) has none and no goroutine to wait for.
	cancel context.CancelFunc
	done   chan struct{}

	mu     sync.Mutex
	status RankStatus

	// q holds live messages between the receiver and the run goroutine.
	q *liveQueue

	// Owned by the run goroutine: the sequence state (tracker.go) and
	// the payload decoder.
	t   tracker
	dec indexer.WireDecoder
}

func newListener(m *Manager, sp spec) *listener {
	l := &listener{spec: sp, m: m, done: make(chan struct{}), t: tracker{replay: sp.replay != ""},
		log: m.log.With("worker_id", sp.rk.Worker, "dp_rank", sp.rk.Rank, "endpoint", sp.endpoint)}
	l.status = RankStatus{Endpoint: sp.endpoint, ReplayEndpoint: sp.replay}
	l.q = newLiveQueue(m.cfg.QueueLen, m.cfg.QueueBytes, m.metrics.queuedBytes)
	l.setState(StateConnecting, nil)
	return l
}

// start runs the listener. It continues from the rank's watermark as the
// index holds it now, not when the listener was created: a held listener
// starts after the index was recovered from a peer's dump, and a restarted
// one after its predecessor's last message. Reconnecting replays what came
// after it.
func (l *listener) start(parent context.Context) {
	if seq, ok := l.m.ix.Watermark(l.spec.rk); ok {
		l.t.resume(seq)
		l.count(func(s *RankStatus) { s.LastSeq, s.HasSeq = seq, true })
	}
	// Down counts from the start, not from creation: a listener held
	// while the node recovers its index from a peer is not stale for it.
	now := l.m.cfg.Now()
	l.count(func(s *RankStatus) { s.DownSince = now })
	ctx, cancel := context.WithCancel(parent)
	l.cancel = cancel
	go l.run(ctx)
}

// stop ends the listener and waits until it has applied its last message.
func (l *listener) stop() {
	if l.cancel != nil {
		l.cancel()
	}
	l.wait()
}

// wait waits for a started listener's goroutine to end.
func (l *listener) wait() {
	if l.cancel != nil {
		<-l.done
	}
}

func (l *listener) snapshot() RankStatus {
	l.mu.Lock()
	st := l.status
	l.mu.Unlock()
	st.QueuedMessages, st.QueuedBytes, st.QueuedBytesPeak = l.q.usage()
	return st
}

// downTooLong reports whether the listener has been down longer than
// Config.StaleAfter at now.
func (l *listener) downTooLong(now time.Time) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return !l.status.DownSince.IsZero() && now.Sub(l.status.DownSince) > l.m.cfg.StaleAfter
}

// judge records the manager's staleness judgement (Manager.JudgeStale),
// moving the listener between the state gauges when it changes what they
// show.
func (l *listener) judge(stale bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.status.Stale == stale {
		return
	}
	from := shownState(l.status.State, l.status.Stale)
	l.status.Stale = stale
	l.m.metrics.stateChange(from, shownState(l.status.State, stale))
}

// shownState is the state the listener-state metric counts a listener in:
// a stale one as stale (not failed), whatever it is doing meanwhile, until
// the next judgement clears it.
func shownState(s State, stale bool) State {
	if stale && s != stateStopped && s != "" {
		return stateStale
	}
	return s
}

func (l *listener) setState(s State, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if from, to := shownState(l.status.State, l.status.Stale), shownState(s, l.status.Stale); from != to {
		l.m.metrics.stateChange(from, to)
	}
	l.status.State = s
	// Down is every state but active, from the moment the listener was
	// created or left active: one that hangs connecting is as useless as
	// one that fails.
	switch {
	case s == StateActive:
		l.status.DownSince = time.Time{}
	case l.status.DownSince.IsZero():
		l.status.DownSince = l.m.cfg.Now()
	}
	if err != nil {
		l.status.LastError = err.Error()
	} else if s == StateActive {
		l.status.LastError = ""
	}
}

func (l *listener) count(f func(*RankStatus)) {
	l.mu.Lock()
	f(&l.status)
	l.mu.Unlock()
}

// run connects, follows the stream until the connection fails, and
// reconnects with exponential backoff and jitter, until ctx ends.
func (l *listener) run(ctx context.Context) {
	defer close(l.done)
	defer l.setState(stateStopped, nil)
	backoff.Loop{
		Min: l.m.cfg.BackoffMin, Max: l.m.cfg.BackoffMax,
		Session:    l.session,
		Connecting: func() { l.setState(StateConnecting, nil) },
		Failed:     func(err error) { l.setState(StateFailed, err) },
		Log:        l.log,
		Msg:        "kv events connection failed; reconnecting",
	}.Run(ctx)
}

// session runs one connection. It reports whether any message arrived
// (which resets the backoff) and why the connection ended.
func (l *listener) session(ctx context.Context) (received bool, err error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	sub, err := zmqx.DialSub(ctx, l.m.dialAddr(l.spec.endpoint), l.log)
	if err != nil {
		return false, err
	}
	l.q.reset()
	errc := make(chan error, 1)
	var wg sync.WaitGroup
	defer func() {
		cancel()
		sub.Close()
		wg.Wait()
		l.q.reset()
	}()
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			msg, err := sub.Recv()
			if err != nil {
				errc <- err
				return
			}
			if l.q.push(msg) {
				l.m.metrics.messages[msgDroppedQueueFull].Inc()
				l.count(func(s *RankStatus) { s.DroppedQueueFull++ })
			}
		}
	}()
	l.setState(StateActive, nil)
	l.log.Info("kv events connected")
	// Messages published before the subscription landed are lost to
	// PUB/SUB; the replay endpoint has them.
	if l.t.replay {
		l.recover(ctx, l.t.connectAsk(), nil)
	}
	for {
		select {
		case <-ctx.Done():
			return received, ctx.Err()
		case <-l.q.ready:
			received = l.drain(ctx) || received
		case err := <-errc:
			// Apply what arrived before the failure, then report it.
			l.drain(ctx)
			l.oversize(err)
			return received, err
		}
	}
}

// drain handles every queued entry, in order. It reports whether there
// was any.
func (l *listener) drain(ctx context.Context) (popped bool) {
	for ctx.Err() == nil {
		e, ok := l.q.pop()
		if !ok {
			break
		}
		popped = true
		if e.drops.n > 0 {
			l.dropped(ctx, e.drops)
		}
		if e.hasMsg {
			l.live(ctx, e.msg)
		}
	}
	return popped
}

// oversize counts a connection cut for a frame past zmqx.MaxFrameBytes
// (SPEC §11: such frames are dropped and counted).
func (l *listener) oversize(err error) {
	if errors.Is(err, zmqx.ErrFrameTooLarge) {
		l.m.metrics.messages[msgDroppedOversize].Inc()
		l.count(func(s *RankStatus) { s.DroppedOversize++ })
	}
}

// message is one sequenced payload, live or replayed.
type message struct {
	seq     uint64
	payload []byte
}

// live handles one message from the SUB socket.
func (l *listener) live(ctx context.Context, msg zmq4.Msg) {
	seq, ok := liveSeq(msg.Frames)
	if !ok {
		l.m.metrics.messages[msgDroppedFrame].Inc()
		l.count(func(s *RankStatus) { s.DroppedFrames++ })
		return
	}
	m := message{seq: seq, payload: msg.Frames[2]}
	step := l.t.live(m.seq)
	switch step.verdict {
	case liveGap:
		l.gap()
	case liveDuplicate:
		l.m.metrics.messages[msgDuplicate].Inc()
	case liveRestart:
		l.restarted(m.seq, "live sequence number went backwards")
	}
	switch {
	case step.verdict == liveDuplicate:
	case step.recover:
		l.recover(ctx, step.ask, &m)
	default:
		if step.lose > 0 {
			l.lose(step.lose)
		}
		l.apply(m, msgApplied)
	}
	l.t.closeWindow(m.seq)
}

// dropped handles live messages the queue had no room for. They are a gap
// like any other, at the place in the stream where they were dropped: the
// live stream has shown sequence numbers up to d.last whose payloads are
// gone. They are replayed when possible; what is still missing is counted
// lost, and the watermark moves past it, as a gap without replay does.
func (l *listener) dropped(ctx context.Context, d dropRun) {
	step := l.t.dropped(d)
	switch {
	case step.skip:
		return
	case step.duplicate:
		l.t.closeWindow(d.last)
		return
	case step.gap:
		l.gap()
	case step.restart:
		l.restarted(d.last, "sequence number of dropped messages went backwards")
	}
	if step.recover {
		l.recover(ctx, step.ask, nil)
	}
	if n := l.t.settleDrop(d); n > 0 {
		l.lose(n)
		l.consume(d.last)
	}
	l.t.closeWindow(d.last)
}

func (l *listener) gap() {
	l.m.metrics.messages[msgGap].Inc()
	l.count(func(s *RankStatus) { s.Gaps++ })
}

func (l *listener) restarted(seq uint64, why string) {
	l.log.Warn("kv events engine restarted; clearing the rank", "why", why, "seq", seq, "last", l.t.last)
	l.m.metrics.messages[msgRestart].Inc()
	l.count(func(s *RankStatus) { s.Restarts++ })
	l.reset()
}

// recover asks the replay endpoint for a range and applies it in order,
// then the message that revealed the gap (if any). Messages that arrive
// live meanwhile wait in the session's queue.
func (l *listener) recover(ctx context.Context, a ask, trigger *message) {
	a = l.t.verifyAsk(a)
	lo, hi, n, err := l.replay(ctx, a)
	switch {
	case err != nil && ctx.Err() != nil:
		return
	case errors.Is(err, errOtherEngine):
		l.restarted(a.from, "replay brings another payload at the last applied sequence number")
		l.recover(ctx, ask{from: 0, limit: a.limit, bounded: a.bounded}, trigger)
		return
	case err != nil:
		l.m.metrics.replays[replayFailed].Inc()
		l.log.Warn("kv events replay failed", "replay_endpoint", l.spec.replay, "from", a.from, "err", err)
		l.count(func(s *RankStatus) { s.ReplayFailures++; s.LastError = "replay: " + err.Error() })
	default:
		l.m.metrics.replays[replayOK].Inc()
		if n > 0 {
			l.log.Info("kv events replayed", "from", a.from, "messages", n, "last_seq", hi)
		}
	}
	first, _, liveSeen := l.q.liveExtent()
	l.t.afterReplay(a, lo, hi, n, first, liveSeen)
	if trigger != nil {
		l.inOrder(*trigger, msgApplied)
	}
}

// errReplyOutOfRange: a replay reply the listener refused (replayRange).
var errReplyOutOfRange = errors.New("replay reply outside the asked range")

// errOtherEngine: a verifying replay brought back, at the last applied
// sequence number, a payload other than the one applied there.
var errOtherEngine = errors.New("replay answered by another engine")

// replay runs one replay request and applies the replies as they stream
// in, as long as replayRange admits them. It returns the range of sequence
// numbers applied and their count.
func (l *listener) replay(ctx context.Context, a ask) (lo, hi uint64, n int, err error) {
	ctx, cancel := context.WithTimeout(ctx, l.m.cfg.ReplayTimeout)
	defer cancel()
	d, err := zmqx.Dial(ctx, zmq4.NewDealer, l.m.dialAddr(l.spec.replay), l.log, nil)
	if err != nil {
		return 0, 0, 0, err
	}
	defer d.Close()
	if err := d.Send(zmq4.NewMsgFrom([]byte{}, binary.BigEndian.AppendUint64(nil, a.from))); err != nil {
		return 0, 0, 0, fmt.Errorf("send replay request: %w", err)
	}
	rr := replayRange{next: a.from}
	for {
		msg, err := d.Recv()
		if err != nil {
			l.oversize(err)
			if ctx.Err() != nil && errors.Is(err, context.DeadlineExceeded) {
				err = fmt.Errorf("no end of replay within %v: %w", l.m.cfg.ReplayTimeout, err)
			}
			return lo, hi, n, err
		}
		m, end, ok := replyMessage(msg.Frames)
		switch {
		case !ok:
			l.m.metrics.messages[msgDroppedFrame].Inc()
			l.count(func(s *RankStatus) { s.DroppedFrames++ })
			continue
		case end:
			return lo, hi, n, nil
		}
		first, hiLive, liveSeen := l.q.liveExtent()
		limit, liveHi := replayLimit(a, first, hiLive, liveSeen)
		switch rr.admit(m.seq, limit, liveHi) {
		case replyEnough:
			return lo, hi, n, nil
		case replyReject:
			l.m.metrics.messages[msgReplayRejected].Inc()
			l.count(func(s *RankStatus) { s.ReplayRejected++ })
			return lo, hi, n, fmt.Errorf("%w: seq %d after %d replies, asked from %d (live stream at %d)",
				errReplyOutOfRange, m.seq, rr.n, a.from, liveHi)
		}
		if a.verify && m.seq == a.from {
			// Asked for only to check who answers (tracker.verifyAsk); it was
			// applied already.
			if !l.t.sameEngine(m.payload) {
				return lo, hi, n, errOtherEngine
			}
			continue
		}
		if n == 0 {
			lo = m.seq
		}
		hi, n = m.seq, n+1
		l.inOrder(m, msgReplayed)
	}
}

// replyMessage parses a replay reply: ["", seq, payload] or
// ["", topic, seq, payload] (the empty delimiter is optional).
func replyMessage(f [][]byte) (m message, end, ok bool) {
	if len(f) > 0 && len(f[0]) == 0 {
		f = f[1:]
	}
	switch len(f) {
	case 2:
	case 3:
		f = f[1:]
	default:
		return m, false, false
	}
	if len(f[0]) != 8 {
		return m, false, false
	}
	m.seq, m.payload = binary.BigEndian.Uint64(f[0]), f[1]
	return m, m.seq == endOfReplay, true
}

// inOrder applies a message that is known not to be a restart: already
// applied ones are duplicates, and a jump forward is a counted loss.
func (l *listener) inOrder(m message, how msgStatus) {
	dup, lose := l.t.inOrder(m.seq)
	if dup {
		l.m.metrics.messages[msgDuplicate].Inc()
		return
	}
	if lose > 0 {
		l.lose(lose)
	}
	l.apply(m, how)
}

func (l *listener) lose(n uint64) {
	l.m.metrics.lost.Add(float64(n))
	l.count(func(s *RankStatus) { s.LostMessages += n })
	l.log.Warn("kv events lost", "messages", n, "last", l.t.last)
}

// consume moves the watermark to seq without applying anything: the
// messages up to it are lost (counted by the caller), and asking for them
// again would not bring them. seq is one the live stream has shown.
func (l *listener) consume(seq uint64) {
	l.t.consume(seq)
	l.count(func(s *RankStatus) { s.LastSeq, s.HasSeq = seq, true })
	l.m.ix.SetWatermark(l.spec.rk, seq)
}

// reset clears the rank's blocks and watermark (engine restart).
func (l *listener) reset() {
	if _, err := l.m.ix.Apply(l.spec.rk, indexer.Batch{Reset: true}); err != nil {
		l.log.Debug("reset of an unindexed rank", "err", err)
	}
	l.t.reset()
}

// scratchKeep is the largest payload whose decoding buffers a listener
// keeps for the next one. The decoder holds on to the last payload and to
// buffers sized for the largest batch; after a rare huge one they go.
const scratchKeep = 1 << 20

// apply decodes one payload and applies it to the index. The sequence
// number is consumed whatever the payload holds: a malformed batch is
// dropped and counted, and asking for it again would bring the same bytes.
func (l *listener) apply(m message, how msgStatus) {
	l.t.applied(m.seq, m.payload)
	l.count(func(s *RankStatus) { s.LastSeq, s.HasSeq = m.seq, true; s.Messages++ })
	l.m.acquire()
	defer l.m.release()
	if len(m.payload) > scratchKeep {
		defer func() { l.dec = indexer.WireDecoder{} }()
	}
	b, err := l.dec.Decode(m.payload)
	if err != nil {
		l.m.metrics.messages[msgDroppedMalformed].Inc()
		l.count(func(s *RankStatus) { s.DroppedMalformed++ })
		l.log.Debug("malformed kv events batch dropped", "seq", m.seq, "err", err)
		l.m.ix.SetWatermark(l.spec.rk, m.seq)
		return
	}
	l.m.metrics.messages[how].Inc()
	l.m.metrics.droppedEvents[dropMalformed].Add(float64(b.Malformed))
	l.m.metrics.droppedEvents[dropNonMainGroup].Add(float64(b.Ignored))
	st, _ := l.m.ix.ApplyWire(l.spec.rk, m.seq, b)
	l.m.metrics.droppedEvents[dropUnknownRank].Add(float64(st.UnknownRank))
	l.m.metrics.droppedEvents[dropBlockSize].Add(float64(st.WrongBlockSize))
}
