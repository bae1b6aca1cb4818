package ingest

import "hash/maphash"

// tracker is a listener's sequence state and the decisions that follow
// from it: in order, gap, duplicate or engine restart; what to ask the
// replay endpoint for; what is lost; when the duplicate window closes.
// It touches no socket, index, metric or clock. Its methods that judge
// (live, dropped, settleDrop, inOrder, ...) only read the state; the
// listener carries a decision out and then records what it did with the
// ones that change it (applied, consume, reset, openWindow, closeWindow).
// Owned by the listener's run goroutine.
type tracker struct {
	// replay: the rank has a replay endpoint, so gaps can be recovered.
	replay bool

	// last is the sequence number of the last applied message.
	last    uint64
	hasLast bool
	// After the replay on connect applied [dupLo, dupHi], live messages in
	// that range repeat it: they are duplicates, not an engine restart
	// (see afterReplay). The window closes once the live stream reaches
	// dupHi.
	window       bool
	dupLo, dupHi uint64
	// digest identifies the payload applied at last (hasDigest: one was
	// applied by this listener since the rank's last reset). A replay
	// asked from last must bring the same payload back; another one means
	// the engine restarted while we were away and has counted past last
	// since (see verifyAsk).
	digest    uint64
	hasDigest bool
}

// liveVerdict is what a live message is, against the last applied one.
type liveVerdict uint8

const (
	liveInOrder   liveVerdict = iota // the first ever, or last+1: apply it
	liveGap                          // past last+1: something is missing before it
	liveDuplicate                    // inside the duplicate window: skip it
	liveRestart                      // at or below last: the engine restarted, clear the rank
)

// liveStep is the decision on one live message. The listener counts a gap
// or a restart (a restart also clears the rank), then either replays ask
// and applies the message after it (recover), or counts lose messages
// lost and applies the message, unless it is a duplicate.
type liveStep struct {
	verdict liveVerdict
	recover bool // replay ask first; the message applies after it
	ask     ask
	lose    uint64
}

// live judges a live message with sequence number seq.
func (t *tracker) live(seq uint64) liveStep {
	switch {
	case !t.hasLast || seq == t.last+1:
		return liveStep{verdict: liveInOrder}
	case seq > t.last+1:
		if t.replay {
			return liveStep{verdict: liveGap, recover: true, ask: ask{from: t.last + 1, limit: seq, bounded: true}}
		}
		return liveStep{verdict: liveGap, lose: seq - t.last - 1}
	case t.inWindow(seq):
		return liveStep{verdict: liveDuplicate}
	}
	// PUB/SUB never redelivers: a live sequence number at or below the
	// last applied one means the engine restarted and counts afresh.
	if t.replay && seq > 0 {
		// The restarted engine's first messages went out before this one;
		// its replay buffer has them.
		return liveStep{verdict: liveRestart, recover: true, ask: ask{from: 0, limit: seq, bounded: true}}
	}
	return liveStep{verdict: liveRestart}
}

// dropStep is the decision on a run of live messages the queue had no
// room for: a gap like any other, at its place in the stream, up to and
// including the run's last sequence number.
type dropStep struct {
	skip      bool // nothing to recover: no message of the run was well formed
	duplicate bool // the replay on connect applied them already (the window closes)
	gap       bool // count a gap
	restart   bool // count a restart and clear the rank
	recover   bool // replay ask, then settleDrop
	ask       ask
}

// dropped judges a run of dropped live messages.
func (t *tracker) dropped(d dropRun) dropStep {
	if !d.hasSeq {
		return dropStep{skip: true}
	}
	var s dropStep
	hi := d.last
	switch {
	case !t.hasLast || hi > t.last:
		s.gap = t.hasLast
	case t.inWindow(hi):
		return dropStep{duplicate: true}
	default:
		s.restart = true
	}
	if t.replay {
		from := uint64(0)
		if t.hasLast && !s.restart {
			from = t.last + 1
		}
		s.recover, s.ask = true, ask{from: from, limit: hi + 1, bounded: true}
	}
	return s
}

// settleDrop returns, once a dropped run's replay (if any) is done, how
// many of its messages are still missing. When that is not zero they are
// lost, and the listener moves the watermark to the run's last sequence
// number (consume) — one the live stream showed — so that the next
// message is in order and nothing is counted twice.
func (t *tracker) settleDrop(d dropRun) (lose uint64) {
	switch {
	case !t.hasLast:
		return min(d.n, d.last+1)
	case t.last < d.last:
		return d.last - t.last
	}
	return 0
}

// inOrder judges a message known not to be a restart (a replayed one, or
// the one that revealed a gap, after its replay): one at or below last is
// a duplicate; one past last+1 comes after lose lost messages.
func (t *tracker) inOrder(seq uint64) (duplicate bool, lose uint64) {
	switch {
	case t.hasLast && seq <= t.last:
		return true, 0
	case t.hasLast && seq > t.last+1:
		return false, seq - t.last - 1
	}
	return false, 0
}

// connectAsk is the replay on connect: everything after last (all the
// engine has, for a new listener), unbounded until the first live message
// lands.
func (t *tracker) connectAsk() ask {
	if t.hasLast {
		return ask{from: t.last + 1}
	}
	return ask{}
}

// ask is one replay request: everything from `from` on, up to limit, the
// first sequence number the live stream delivers itself. Only the replay
// on connect is unbounded: the live stream has shown nothing yet, and
// limit becomes its first message once it does.
type ask struct {
	from, limit uint64
	bounded     bool
	// verify: from is the last applied sequence number, asked for again
	// only to compare its payload with the one applied (see verifyAsk).
	verify bool
}

// verifyAsk returns a, asked one message early when it continues the
// stream from a message this listener applied itself: the reply at last
// then tells whether the engine answering is the one it came from. A
// sequence number that went backwards gives a restart away only if we see
// it: an engine that restarted while the connection was down, or while
// its messages were lost, may have counted past last since, and its replay
// from last+1 would look like the rest of the old stream.
func (t *tracker) verifyAsk(a ask) ask {
	if t.hasDigest && t.hasLast && a.from == t.last+1 {
		a.from, a.verify = t.last, true
	}
	return a
}

// sameEngine reports whether payload, the reply at last to a verifying
// replay, is the payload applied there.
func (t *tracker) sameEngine(payload []byte) bool {
	return maphash.Bytes(digestSeed, payload) == t.digest
}

// digestSeed keys the payload digests a tracker compares (ask.verify).
var digestSeed = maphash.MakeSeed()

// afterReplay records what a replay applied, [lo, hi] in n messages, given
// the first message the live stream delivered (liveSeen: any did). A
// bounded replay stops before the live stream's next message, so nothing
// queued repeats it. The one on connect may have run ahead of a live
// stream that had shown nothing yet: live messages in [lo, hi] then
// repeat what it applied, and are duplicates, not a restart. One below lo
// is a restart (or the replay lied), and clears the rank.
func (t *tracker) afterReplay(a ask, lo, hi uint64, n int, firstLive uint64, liveSeen bool) {
	if n > 0 && !a.bounded && (!liveSeen || firstLive <= hi) {
		t.openWindow(lo, hi)
	}
}

// replayLimit returns where the live stream takes over from a replay, and
// the highest sequence number it has shown, given what the live stream
// delivered so far (first, hi; liveSeen: anything). A replay on connect is
// bounded as soon as the live stream delivers its first message.
func replayLimit(a ask, first, hi uint64, liveSeen bool) (limit, liveHi uint64) {
	switch {
	case a.bounded:
		return a.limit, max(hi, a.limit)
	case liveSeen:
		return first, hi
	}
	return endOfReplay, 0
}

// resume continues from a watermark the index holds (a predecessor's or a
// peer dump's): no payload digest comes with it.
func (t *tracker) resume(seq uint64) {
	t.last, t.hasLast, t.hasDigest = seq, true, false
}

// applied records that the message seq, with payload, was applied (or
// consumed as malformed: asking for it again would bring the same bytes).
func (t *tracker) applied(seq uint64, payload []byte) {
	t.last, t.hasLast = seq, true
	t.digest, t.hasDigest = maphash.Bytes(digestSeed, payload), true
}

// consume moves last to seq without applying anything: the messages up to
// it are lost, and asking for them again would not bring them. seq is one
// the live stream has shown.
func (t *tracker) consume(seq uint64) {
	t.last, t.hasLast, t.hasDigest = seq, true, false
}

// reset forgets the stream: the engine restarted.
func (t *tracker) reset() {
	t.last, t.hasLast, t.window, t.hasDigest = 0, false, false, false
}

// inWindow reports whether a sequence number at or below the last applied
// one was applied by the replay on connect.
func (t *tracker) inWindow(seq uint64) bool {
	return t.window && seq >= t.dupLo && seq <= t.dupHi
}

func (t *tracker) openWindow(lo, hi uint64) {
	t.window, t.dupLo, t.dupHi = true, lo, hi
}

// closeWindow ends the duplicate window once the live stream has caught
// up with the replay: from there on a smaller sequence number can only be
// a restart.
func (t *tracker) closeWindow(seq uint64) {
	if t.window && seq >= t.dupHi {
		t.window = false
	}
}

// replayRange judges a replay's replies one by one. A replay asked from
// `from` may apply one contiguous run of sequence numbers — an engine's
// replay buffer holds its messages in order, one each — starting at or
// after from (later when the buffer no longer reaches back that far) and
// ending before the live stream's limit. Anything else is refused, and
// the replay fails for the rest: applying it would move the watermark
// where the live stream never was, and every later live message would
// read as a duplicate.
type replayRange struct {
	next uint64 // the lowest sequence number the next reply may have
	n    int    // replies admitted
}

type replyVerdict int

const (
	replyApply  replyVerdict = iota
	replyEnough              // the live stream delivers it: stop, successfully
	replyReject              // below the start, a duplicate, backwards, a hole, or ahead of the live stream
)

// admit judges one reply. limit is the first sequence number the live
// stream delivers itself (endOfReplay when unbounded), liveHi the highest
// it has shown. vLLM replays its whole buffer, so replies reaching limit
// are normal; one that jumps past anything live is not.
func (r *replayRange) admit(seq, limit, liveHi uint64) replyVerdict {
	switch {
	case seq < r.next:
		return replyReject
	case seq >= limit:
		// The live stream delivers it. The replay on connect can pass the
		// first live message before it lands; its next replies are then
		// still on their way live.
		if seq == limit || seq <= liveHi || (r.n > 0 && seq == r.next) {
			return replyEnough
		}
		return replyReject
	case seq > r.next && r.n > 0:
		return replyReject
	}
	r.next, r.n = seq+1, r.n+1
	return replyApply
}

// endOfReplay is the sequence number that ends a replay.
const endOfReplay = ^uint64(0)
