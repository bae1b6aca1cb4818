package ingest

import "testing"

// Tracker states the tables below start from.
var (
	fresh      = tracker{replay: true}                                        // nothing applied yet
	at10       = tracker{replay: true, last: 10, hasLast: true}               // applied up to 10
	at10NoRepl = tracker{last: 10, hasLast: true}                             // no replay endpoint
	at10Window = tracker{replay: true, last: 10, hasLast: true, window: true, // the replay on connect applied [6, 10]
		dupLo: 6, dupHi: 10}
)

func TestTrackerLive(t *testing.T) {
	tests := []struct {
		name string
		t    tracker
		seq  uint64
		want liveStep
	}{
		{"first message ever", fresh, 42, liveStep{verdict: liveInOrder}},
		{"next in order", at10, 11, liveStep{verdict: liveInOrder}},
		{"gap, replayed", at10, 15, liveStep{verdict: liveGap, recover: true, ask: ask{from: 11, limit: 15, bounded: true}}},
		{"gap, no replay endpoint: lost", at10NoRepl, 15, liveStep{verdict: liveGap, lose: 4}},
		{"inside the duplicate window", at10Window, 8, liveStep{verdict: liveDuplicate}},
		{"at the window's top", at10Window, 10, liveStep{verdict: liveDuplicate}},
		{"below the window: restart", at10Window, 5, liveStep{verdict: liveRestart, recover: true, ask: ask{from: 0, limit: 5, bounded: true}}},
		{"backwards: restart, its earlier messages replayed", at10, 3, liveStep{verdict: liveRestart, recover: true, ask: ask{from: 0, limit: 3, bounded: true}}},
		{"repeat of last: restart", at10, 10, liveStep{verdict: liveRestart, recover: true, ask: ask{from: 0, limit: 10, bounded: true}}},
		{"restart at 0: nothing before it to replay", at10, 0, liveStep{verdict: liveRestart}},
		{"restart, no replay endpoint", at10NoRepl, 3, liveStep{verdict: liveRestart}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := tt.t
			if got := tt.t.live(tt.seq); got != tt.want {
				t.Fatalf("live(%d) = %+v, want %+v", tt.seq, got, tt.want)
			}
			if tt.t != before {
				t.Fatalf("judging changed the state: %+v, was %+v", tt.t, before)
			}
		})
	}
}

func TestTrackerDropped(t *testing.T) {
	run := func(n, first, last uint64) dropRun { return dropRun{n: n, first: first, last: last, hasSeq: true} }
	tests := []struct {
		name string
		t    tracker
		d    dropRun
		want dropStep
	}{
		{"no well-formed message", at10, dropRun{n: 3}, dropStep{skip: true}},
		{"first messages ever", fresh, run(3, 4, 6), dropStep{recover: true, ask: ask{from: 0, limit: 7, bounded: true}}},
		{"ahead: a gap", at10, run(3, 11, 13), dropStep{gap: true, recover: true, ask: ask{from: 11, limit: 14, bounded: true}}},
		{"ahead, no replay endpoint", at10NoRepl, run(3, 11, 13), dropStep{gap: true}},
		{"inside the duplicate window", at10Window, run(2, 7, 8), dropStep{duplicate: true}},
		{"backwards: restart", at10, run(2, 2, 3), dropStep{restart: true, recover: true, ask: ask{from: 0, limit: 4, bounded: true}}},
		{"backwards, no replay endpoint", at10NoRepl, run(2, 2, 3), dropStep{restart: true}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := tt.t
			if got := tt.t.dropped(tt.d); got != tt.want {
				t.Fatalf("dropped(%+v) = %+v, want %+v", tt.d, got, tt.want)
			}
			if tt.t != before {
				t.Fatalf("judging changed the state: %+v, was %+v", tt.t, before)
			}
		})
	}
}

// TestTrackerSettleDrop: what a dropped run leaves lost once its replay
// (if any) has applied what it could.
func TestTrackerSettleDrop(t *testing.T) {
	run := dropRun{n: 3, first: 11, last: 13, hasSeq: true}
	tests := []struct {
		name string
		t    tracker
		d    dropRun
		want uint64
	}{
		{"nothing applied: the run is lost", fresh, dropRun{n: 3, first: 4, last: 6, hasSeq: true}, 3},
		{"nothing applied, run starts at 0: no more than its numbers", fresh, dropRun{n: 5, first: 0, last: 1, hasSeq: true}, 2},
		{"replay brought nothing", at10, run, 3},
		{"replay brought part", tracker{last: 12, hasLast: true}, run, 1},
		{"replay brought all", tracker{last: 13, hasLast: true}, run, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.t.settleDrop(tt.d); got != tt.want {
				t.Fatalf("settleDrop = %d, want %d", got, tt.want)
			}
		})
	}
}

func TestTrackerInOrder(t *testing.T) {
	tests := []struct {
		name string
		t    tracker
		seq  uint64
		dup  bool
		lose uint64
	}{
		{"first ever", fresh, 7, false, 0},
		{"next", at10, 11, false, 0},
		{"already applied", at10, 10, true, 0},
		{"older", at10, 4, true, 0},
		{"past a hole", at10, 14, false, 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if dup, lose := tt.t.inOrder(tt.seq); dup != tt.dup || lose != tt.lose {
				t.Fatalf("inOrder(%d) = %v, %d, want %v, %d", tt.seq, dup, lose, tt.dup, tt.lose)
			}
		})
	}
}

// TestTrackerVerifyAsk: a replay that continues the stream from a
// message this listener applied asks for that message again, to check
// who answers; nothing else does.
func TestTrackerVerifyAsk(t *testing.T) {
	applied := at10
	applied.applied(10, []byte("payload 10"))
	consumed := applied
	consumed.consume(12)
	tests := []struct {
		name string
		t    tracker
		a    ask
		want ask
	}{
		{"continues an applied message", applied, ask{from: 11, limit: 15, bounded: true}, ask{from: 10, limit: 15, bounded: true, verify: true}},
		{"on connect", applied, applied.connectAsk(), ask{from: 10, verify: true}},
		{"watermark from a dump: no digest", at10, ask{from: 11}, ask{from: 11}},
		{"after lost messages: no digest", consumed, ask{from: 13}, ask{from: 13}},
		{"from 0 after a restart", applied, ask{from: 0, limit: 5, bounded: true}, ask{from: 0, limit: 5, bounded: true}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.t.verifyAsk(tt.a); got != tt.want {
				t.Fatalf("verifyAsk(%+v) = %+v, want %+v", tt.a, got, tt.want)
			}
		})
	}
	if !applied.sameEngine([]byte("payload 10")) || applied.sameEngine([]byte("another engine's 10")) {
		t.Fatal("sameEngine does not tell the applied payload from another")
	}
}

// TestTrackerAfterReplay: only the replay on connect opens the duplicate
// window, and only when the live stream has not already passed what it
// applied.
func TestTrackerAfterReplay(t *testing.T) {
	onConnect, bounded := ask{from: 6}, ask{from: 6, limit: 11, bounded: true}
	tests := []struct {
		name      string
		a         ask
		lo, hi    uint64
		n         int
		firstLive uint64
		liveSeen  bool
		window    bool
	}{
		{"on connect, nothing live yet", onConnect, 6, 10, 5, 0, false, true},
		{"on connect, live stream started inside it", onConnect, 6, 10, 5, 8, true, true},
		{"on connect, live stream started after it", onConnect, 6, 10, 5, 11, true, false},
		{"on connect, nothing replayed", onConnect, 0, 0, 0, 0, false, false},
		{"bounded", bounded, 6, 10, 5, 0, false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tr := tracker{replay: true, last: tt.hi, hasLast: true}
			tr.afterReplay(tt.a, tt.lo, tt.hi, tt.n, tt.firstLive, tt.liveSeen)
			if tr.window != tt.window || (tt.window && (tr.dupLo != tt.lo || tr.dupHi != tt.hi)) {
				t.Fatalf("window %v [%d, %d], want %v [%d, %d]", tr.window, tr.dupLo, tr.dupHi, tt.window, tt.lo, tt.hi)
			}
		})
	}
}

func TestReplayLimit(t *testing.T) {
	tests := []struct {
		name              string
		a                 ask
		first, hi         uint64
		liveSeen          bool
		wantLimit, wantHi uint64
	}{
		{"bounded, nothing live", ask{from: 3, limit: 9, bounded: true}, 0, 0, false, 9, 9},
		{"bounded, live stream further", ask{from: 3, limit: 9, bounded: true}, 9, 12, true, 9, 12},
		{"on connect, nothing live", ask{from: 3}, 0, 0, false, endOfReplay, 0},
		{"on connect, live stream started", ask{from: 3}, 7, 8, true, 7, 8},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if limit, hi := replayLimit(tt.a, tt.first, tt.hi, tt.liveSeen); limit != tt.wantLimit || hi != tt.wantHi {
				t.Fatalf("replayLimit = %d, %d, want %d, %d", limit, hi, tt.wantLimit, tt.wantHi)
			}
		})
	}
}

// TestTrackerRecords: the calls that record what the listener did, and
// the window's life.
func TestTrackerRecords(t *testing.T) {
	tr := fresh
	if got := tr.connectAsk(); got != (ask{}) {
		t.Fatalf("connectAsk of a new listener = %+v, want from 0", got)
	}
	tr.applied(5, []byte("five"))
	if !tr.hasLast || tr.last != 5 || !tr.hasDigest {
		t.Fatalf("after applied: %+v", tr)
	}
	tr.openWindow(3, 5)
	tr.closeWindow(4)
	if !tr.inWindow(4) {
		t.Fatal("window closed before the live stream reached its top")
	}
	tr.closeWindow(5)
	if tr.inWindow(4) {
		t.Fatal("window still open once the live stream reached its top")
	}
	tr.resume(7)
	if tr.last != 7 || !tr.hasLast || tr.hasDigest {
		t.Fatalf("after resume: %+v", tr)
	}
	tr.consume(9)
	if tr.last != 9 || tr.hasDigest {
		t.Fatalf("after consume: %+v", tr)
	}
	tr.openWindow(6, 9)
	tr.reset()
	if tr.hasLast || tr.window || tr.hasDigest || !tr.replay {
		t.Fatalf("after reset: %+v", tr)
	}
}

func TestReplayRangeAdmit(t *testing.T) {
	const asked, none = 10, endOfReplay
	type reply struct {
		seq, limit, liveHi uint64 // the reply, and the live stream when it arrives
		want               replyVerdict
	}
	// A gap replay asked [10, 14): message 14 revealed the gap.
	gap := func(seq uint64, want replyVerdict) reply { return reply{seq, 14, 14, want} }
	tests := []struct {
		name    string
		replies []reply
	}{
		{"contiguous up to the live message", []reply{gap(10, replyApply), gap(11, replyApply), gap(12, replyApply),
			gap(13, replyApply), gap(14, replyEnough)}},
		{"buffer starts later", []reply{gap(12, replyApply), gap(13, replyApply), gap(14, replyEnough)}},
		{"buffer starts past the live message", []reply{{17, 14, 20, replyEnough}}},
		{"below the start", []reply{gap(9, replyReject)}},
		{"far ahead", []reply{gap(1e9, replyReject)}},
		{"far ahead after good ones", []reply{gap(10, replyApply), gap(1e9, replyReject)}},
		{"duplicate", []reply{gap(10, replyApply), gap(10, replyReject)}},
		{"backwards", []reply{gap(11, replyApply), gap(10, replyReject)}},
		{"hole", []reply{gap(10, replyApply), gap(12, replyReject)}},
		{"on connect, nothing live", []reply{{10, none, 0, replyApply}, {11, none, 0, replyApply}, {1e9, none, 0, replyReject}}},
		{"on connect, buffer far ahead", []reply{{1e9, none, 0, replyApply}, {1e9 + 1, none, 0, replyApply}}},
		{"on connect, up to the first live message", []reply{{10, none, 0, replyApply}, {11, 12, 12, replyApply},
			{12, 12, 13, replyEnough}}},
		{"on connect, past the first live message", []reply{{10, none, 0, replyApply}, {11, 10, 10, replyEnough}}},
		{"on connect, far past the first live message", []reply{{10, none, 0, replyApply}, {1e9, 10, 10, replyReject}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := replayRange{next: asked}
			for i, rp := range tt.replies {
				if got := r.admit(rp.seq, rp.limit, rp.liveHi); got != rp.want {
					t.Fatalf("reply %d (seq %d): verdict %d, want %d", i, rp.seq, got, rp.want)
				}
			}
		})
	}
}
