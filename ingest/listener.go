package ingest

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"sync"

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

	// Owned by the run goroutine.
	last    uint64
	hasLast bool
	// After a replay from seq `from` that returned up to dupHi, live
	// messages in [dupLo, dupHi] were already applied from the replay (or
	// lost to the engine's buffer before it): they are duplicates, not an
	// engine restart (see recover for dupLo). The window closes once the
	// live stream reaches dupHi.
	window       bool
	dupLo, dupHi uint64

	dec    indexer.WireDecoder
	events []indexer.Event
	blocks []indexer.StoredBlock
}

func newListener(m *Manager, sp spec) *listener {
	l := &listener{spec: sp, m: m, done: make(chan struct{}),
		log: m.log.With("worker_id", sp.rk.Worker, "dp_rank", sp.rk.Rank, "endpoint", sp.endpoint)}
	l.status = RankStatus{Endpoint: sp.endpoint, ReplayEndpoint: sp.replay}
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
		l.last, l.hasLast = seq, true
		l.count(func(s *RankStatus) { s.LastSeq, s.HasSeq = seq, true })
	}
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
	defer l.mu.Unlock()
	return l.status
}

func (l *listener) setState(s State, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.status.State != s {
		l.m.metrics.stateChange(l.status.State, s)
	}
	l.status.State = s
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
	bo := backoff.New(l.m.cfg.BackoffMin, l.m.cfg.BackoffMax)
	for ctx.Err() == nil {
		l.setState(StateConnecting, nil)
		received, err := l.session(ctx)
		if ctx.Err() != nil {
			return
		}
		l.setState(StateFailed, err)
		if received {
			bo.Reset()
		}
		// An engine that stays down would log on every retry; the status
		// has what the debug lines leave out.
		wait, failures, warn := bo.Next()
		level := slog.LevelDebug
		if warn {
			level = slog.LevelWarn
		}
		l.log.Log(ctx, level, "kv events connection failed; reconnecting", "err", err, "retry_in", wait, "failures", failures)
		if !backoff.Sleep(ctx, wait) {
			return
		}
	}
}

// session runs one connection. It reports whether any message arrived
// (which resets the backoff) and why the connection ended.
func (l *listener) session(ctx context.Context) (received bool, err error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	sub, err := zmqx.DialSub(ctx, l.spec.endpoint, l.log)
	if err != nil {
		return false, err
	}
	msgs := make(chan zmq4.Msg, l.m.cfg.QueueLen)
	errc := make(chan error, 1)
	var wg sync.WaitGroup
	defer func() {
		cancel()
		sub.Close()
		wg.Wait()
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
			select {
			case msgs <- msg:
			case <-ctx.Done():
				return
			}
		}
	}()
	l.setState(StateActive, nil)
	l.log.Info("kv events connected")
	// Messages published before the subscription landed are lost to
	// PUB/SUB; the replay endpoint has them.
	if l.spec.replay != "" {
		from := uint64(0)
		if l.hasLast {
			from = l.last + 1
		}
		l.recover(ctx, from, nil)
	}
	for {
		select {
		case <-ctx.Done():
			return received, ctx.Err()
		case msg := <-msgs:
			received = true
			l.live(ctx, msg)
		case err := <-errc:
			// Apply what arrived before the failure, then report it.
			for drained := false; !drained; {
				select {
				case msg := <-msgs:
					l.live(ctx, msg)
				default:
					drained = true
				}
			}
			return received, err
		}
	}
}

// message is one sequenced payload, live or replayed.
type message struct {
	seq     uint64
	payload []byte
}

// live handles one message from the SUB socket.
func (l *listener) live(ctx context.Context, msg zmq4.Msg) {
	f := msg.Frames
	if len(f) != 3 || len(f[1]) != 8 {
		l.m.metrics.messages[msgDroppedFrame].Inc()
		l.count(func(s *RankStatus) { s.DroppedFrames++ })
		return
	}
	m := message{seq: binary.BigEndian.Uint64(f[1]), payload: f[2]}
	switch {
	case !l.hasLast || m.seq == l.last+1:
		l.apply(m, msgApplied)
	case m.seq > l.last+1:
		l.m.metrics.messages[msgGap].Inc()
		l.count(func(s *RankStatus) { s.Gaps++ })
		if l.spec.replay != "" {
			l.recover(ctx, l.last+1, &m)
			break
		}
		l.lose(m.seq - l.last - 1)
		l.apply(m, msgApplied)
	case l.window && m.seq >= l.dupLo:
		l.m.metrics.messages[msgDuplicate].Inc()
	default:
		// PUB/SUB never redelivers: a live sequence number at or below the
		// last applied one means the engine restarted and counts afresh.
		l.log.Warn("kv events sequence went backwards: engine restarted; clearing the rank",
			"seq", m.seq, "last", l.last)
		l.m.metrics.messages[msgRestart].Inc()
		l.count(func(s *RankStatus) { s.Restarts++ })
		l.reset()
		if l.spec.replay != "" && m.seq > 0 {
			// The restarted engine's first messages went out before this
			// one; its replay buffer has them.
			l.recover(ctx, 0, &m)
			break
		}
		l.apply(m, msgApplied)
	}
	if l.window && m.seq >= l.dupHi {
		// The live stream has caught up with the replay: from here on a
		// smaller sequence number can only be a restart.
		l.window = false
	}
}

// recover asks the replay endpoint for everything from seq on and applies
// it in order, then the message that revealed the gap (if any). Messages
// that arrive live meanwhile wait in the session's queue; those the
// replay already covered are dropped as duplicates.
func (l *listener) recover(ctx context.Context, from uint64, trigger *message) {
	lo, hi, n, err := l.replay(ctx, from)
	switch {
	case err != nil && ctx.Err() != nil:
		return
	case err != nil:
		l.m.metrics.replays[replayFailed].Inc()
		l.log.Warn("kv events replay failed", "replay_endpoint", l.spec.replay, "from", from, "err", err)
		l.count(func(s *RankStatus) { s.ReplayFailures++; s.LastError = "replay: " + err.Error() })
	default:
		l.m.metrics.replays[replayOK].Inc()
		if n > 0 {
			l.log.Info("kv events replayed", "from", from, "messages", n, "last_seq", hi)
		}
	}
	if n > 0 {
		// After a watermark (from > 0) the window starts at from, not lo:
		// when the engine's buffer no longer reached back to from, live
		// messages queued meanwhile can be older than lo. They were counted
		// lost; applying them now would break the order, and reading them
		// as a restart would clear the rank. A listener without one (from
		// 0) can receive nothing live older than lo (it was published
		// before it subscribed), so there the window starts at lo, and a
		// restarted engine's first numbers below lo still read as a
		// restart.
		dupLo := lo
		if from > 0 {
			dupLo = min(from, lo)
		}
		l.window, l.dupLo, l.dupHi = true, dupLo, hi
	}
	if trigger != nil {
		l.inOrder(*trigger, msgApplied)
	}
}

// replay runs one replay request and applies the replies as they stream
// in. It returns the range of sequence numbers received and their count.
func (l *listener) replay(ctx context.Context, from uint64) (lo, hi uint64, n int, err error) {
	ctx, cancel := context.WithTimeout(ctx, l.m.cfg.ReplayTimeout)
	defer cancel()
	d, err := zmqx.Dial(ctx, zmq4.NewDealer, l.spec.replay, l.log, nil)
	if err != nil {
		return 0, 0, 0, err
	}
	defer d.Close()
	if err := d.Send(zmq4.NewMsgFrom([]byte{}, binary.BigEndian.AppendUint64(nil, from))); err != nil {
		return 0, 0, 0, fmt.Errorf("send replay request: %w", err)
	}
	for {
		msg, err := d.Recv()
		if err != nil {
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
		if n == 0 {
			lo = m.seq
		}
		hi, n = max(hi, m.seq), n+1
		l.inOrder(m, msgReplayed)
	}
}

// endOfReplay is the sequence number that ends a replay.
const endOfReplay = ^uint64(0)

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
	switch {
	case l.hasLast && m.seq <= l.last:
		l.m.metrics.messages[msgDuplicate].Inc()
		return
	case l.hasLast && m.seq > l.last+1:
		l.lose(m.seq - l.last - 1)
	}
	l.apply(m, how)
}

func (l *listener) lose(n uint64) {
	l.m.metrics.lost.Add(float64(n))
	l.count(func(s *RankStatus) { s.LostMessages += n })
	l.log.Warn("kv events lost", "messages", n, "last", l.last)
}

// reset clears the rank's blocks and watermark (engine restart).
func (l *listener) reset() {
	if _, err := l.m.ix.Apply(l.spec.rk, indexer.Batch{Reset: true}); err != nil {
		l.log.Debug("reset of an unindexed rank", "err", err)
	}
	l.last, l.hasLast, l.window = 0, false, false
}

// apply decodes one payload and applies it to the index. The sequence
// number is consumed whatever the payload holds: a malformed batch is
// dropped and counted, and asking for it again would bring the same bytes.
func (l *listener) apply(m message, how msgStatus) {
	l.last, l.hasLast = m.seq, true
	l.count(func(s *RankStatus) { s.LastSeq, s.HasSeq = m.seq, true; s.Messages++ })
	l.m.acquire()
	defer l.m.release()
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
	target := l.spec.rk
	if b.HasDPRank {
		target.Rank = b.DPRank
	}
	for range 2 { // once more if the partition's block size changed meanwhile
		bs, ok := l.m.ix.BlockSize(target)
		if !ok {
			l.m.metrics.droppedEvents[dropUnknownRank].Add(float64(len(b.Events)))
			break
		}
		var invalid int
		l.events, l.blocks, invalid = b.ToEvents(bs, l.blocks, l.events)
		_, err = l.m.ix.Apply(target, indexer.Batch{Seq: m.seq, HasSeq: target == l.spec.rk, Events: l.events, BlockSize: bs})
		if !errors.Is(err, indexer.ErrBlockSizeChanged) {
			l.m.metrics.droppedEvents[dropBlockSize].Add(float64(invalid))
			break
		}
	}
	if target != l.spec.rk {
		l.m.ix.SetWatermark(l.spec.rk, m.seq)
	}
}
