package server

import (
	"fmt"
	"testing"
	"time"
)

// Test_RecoveryDecide: the rules that end a recovery, round by round.
func Test_RecoveryDecide(t *testing.T) {
	cfg := DefaultRecoveryConfig()
	const (
		u = peerUnreachable
		r = peerRecovering
		e = peerEmpty
		s = peerServing
		l = peerLoaded
	)
	for _, tc := range []struct {
		name            string
		states          []peerState
		elapsed, silent time.Duration
		want            verdict
	}{
		{"a dump loaded", []peerState{r, l}, 0, 0, verdictLoaded},
		{"loaded wins over any wait", []peerState{s, l}, time.Hour, time.Hour, verdictLoaded},
		// A rejoining follower: the leader's log is on its way (its
		// pseudo-peer serves) and the others are not asked yet or still
		// answer nothing useful. It must not give up at MembersWait.
		{"leader log pending past MembersWait", []peerState{u, u, s}, 11 * time.Second, 11 * time.Second, verdictRetry},
		{"a member serves a broken dump", []peerState{r, s}, 30 * time.Second, 30 * time.Second, verdictRetry},
		{"serving until ServingWait", []peerState{s}, 2 * time.Minute, 2 * time.Minute, verdictServingTimeout},
		// A whole-cluster restart: everyone recovering, decided at once.
		{"every member recovering", []peerState{r, r}, 0, 0, verdictStartEmpty},
		{"recovering and unreachable", []peerState{r, u}, 0, 0, verdictStartEmpty},
		{"an empty member", []peerState{e, u}, 0, 0, verdictStartEmpty},
		{"empty and recovering", []peerState{e, r}, 0, 0, verdictStartEmpty},
		{"nobody reached yet", []peerState{u, u}, 9 * time.Second, 9 * time.Second, verdictRetry},
		{"nobody reached in MembersWait", []peerState{u, u}, 10 * time.Second, 10 * time.Second, verdictNobodyReached},
		{"no state at all", nil, 10 * time.Second, 10 * time.Second, verdictNobodyReached},
		// The leader lost for a moment late in a wait for its log: the
		// silence, not the whole wait, counts against MembersWait.
		{"a moment without anyone after a long wait", []peerState{u, u}, 11 * time.Second, 200 * time.Millisecond, verdictRetry},
		{"silent for MembersWait after contact", []peerState{u, u}, 25 * time.Second, 10 * time.Second, verdictNobodyReached},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := decide(tc.states, tc.elapsed, tc.silent, cfg); got != tc.want {
				t.Fatalf("decide(%v, %v, %v) = %v, want %v", tc.states, tc.elapsed, tc.silent, got, tc.want)
			}
		})
	}
}

func Test_RecoveryClassifyFailure(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want peerState
	}{
		{fmt.Errorf("%w: 503 Service Unavailable: not_ready", errPeerRecovering), peerRecovering},
		{fmt.Errorf("%w: dial tcp: connection refused", errPeerUnreachable), peerUnreachable},
		{fmt.Errorf("%w: 401 Unauthorized", errPeerRefused), peerUnreachable},
		{fmt.Errorf("%w: 500 Internal Server Error", errPeerAnswer), peerServing},
		{fmt.Errorf("load: %w", errStalled), peerServing},
		{fmt.Errorf("unexpected EOF"), peerServing},
	} {
		if got := classifyFailure(tc.err); got != tc.want {
			t.Errorf("classifyFailure(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
}

func Test_LeaderLogPending(t *testing.T) {
	for _, tc := range []struct {
		leader          string
		commit, applied uint64
		want            bool
	}{
		{"", 0, 0, false},     // no leader: nothing is on its way
		{"n1", 0, 0, true},    // heartbeats only: commit index 0 (a restarted follower)
		{"n1", 0, 40, true},   // applied a snapshot, no append yet
		{"n1", 50, 40, true},  // applying
		{"n1", 50, 50, false}, // caught up
	} {
		if got := leaderLogPending(tc.leader, tc.commit, tc.applied); got != tc.want {
			t.Errorf("leaderLogPending(%q, %d, %d) = %v, want %v", tc.leader, tc.commit, tc.applied, got, tc.want)
		}
	}
}
