package server

import (
	"errors"
	"time"
)

// The rules that end a startup recovery (SPEC §7), kept apart from the
// I/O so that they can be read, and tested, at once.
//
// A round asks every peer once. Each answer is one peerState:
//
//   - peerLoaded: its dump loaded with at least one event. Recovery is
//     over.
//   - peerServing: it answered but its dump did not load (cut short, a
//     5xx other than "recovering", its catalog index not applied here in
//     time), or it is a member whose address this node will learn from
//     the leader's log, which is on its way (a leader is known and this
//     node has not caught up with it yet). It may serve next time.
//   - peerRecovering: 503 not_ready, the answer of a node recovering its
//     own index (GET /dump refuses then, so that a partial index never
//     seeds another).
//   - peerEmpty: its dump loaded and held no event at all: it serves an
//     empty index (it started empty itself, or its workers hold nothing).
//     A dump whose events were all skipped (partitions or ranks this
//     node's catalog does not hold yet) is no empty index: that peer
//     counts as serving.
//   - peerUnreachable: no answer (connection refused or reset, no header
//     within HeaderTimeout), or a member whose address nobody has told
//     this node yet while no leader is known. A 4xx (a token it does not
//     accept, no /dump route) counts as unreachable too: asking again
//     does not change it, and it is logged as a warning each time.
//
// decide turns a round into a verdict:
//
//  1. anyone serving: ask again, until ServingWait from the start; then
//     start empty with a warning;
//  2. else, anyone reached (each recovering or empty): start empty now,
//     with one INFO line. This is what lets a whole cluster restart at
//     once: every node is recovering, each learns it from the others'
//     503s in one round, and none waits for another. A node that asks
//     after a peer has started (empty) loads that peer's empty dump.
//  3. else (no one reached): ask again, until MembersWait has passed
//     since the last round that reached anyone (or since the start);
//     then start empty with a warning. A moment without a leader late in
//     a long wait for its log (an election timeout on a loaded machine)
//     does not end the recovery: the silence must last MembersWait.
//
// A "peer" that the round adds when a leader is known and this node has
// not yet applied its commit index (leaderLogPending) keeps rule 1 in
// force while the log is on its way: the members' current addresses and
// the dump's partitions come with it.

// peerState is what one ask of one peer found.
type peerState int

const (
	peerUnreachable peerState = iota
	peerRecovering
	peerEmpty
	peerServing
	peerLoaded
)

func (p peerState) String() string {
	switch p {
	case peerRecovering:
		return "recovering"
	case peerEmpty:
		return "empty"
	case peerServing:
		return "serving"
	case peerLoaded:
		return "loaded"
	}
	return "unreachable"
}

// verdict is what a round decides.
type verdict int

const (
	// verdictRetry: ask again after a pause.
	verdictRetry verdict = iota
	// verdictLoaded: a dump loaded; recovery is over.
	verdictLoaded
	// verdictStartEmpty: every peer reached is recovering or empty; start
	// empty (INFO).
	verdictStartEmpty
	// verdictNobodyReached: no one answered within MembersWait (WARN).
	verdictNobodyReached
	// verdictServingTimeout: someone kept serving dumps that would not
	// load, or a leader's log did not arrive, within ServingWait (WARN).
	verdictServingTimeout
)

// reached reports whether a round reached anyone: a state other than
// peerUnreachable.
func reached(states []peerState) bool {
	for _, s := range states {
		if s != peerUnreachable {
			return true
		}
	}
	return false
}

func (v verdict) String() string {
	switch v {
	case verdictLoaded:
		return "loaded"
	case verdictStartEmpty:
		return "start empty"
	case verdictNobodyReached:
		return "nobody reached"
	case verdictServingTimeout:
		return "serving timeout"
	}
	return "retry"
}

// decide applies the rules to one round's states: elapsed is the time
// since the recovery began, silent the time since the last round that
// reached anyone (or since the start); cfg has its defaults.
func decide(states []peerState, elapsed, silent time.Duration, cfg RecoveryConfig) verdict {
	var serving, reached int
	for _, s := range states {
		switch s {
		case peerLoaded:
			return verdictLoaded
		case peerServing:
			serving++
			reached++
		case peerRecovering, peerEmpty:
			reached++
		}
	}
	switch {
	case serving > 0 && elapsed >= cfg.ServingWait:
		return verdictServingTimeout
	case serving > 0:
		return verdictRetry
	case reached > 0:
		return verdictStartEmpty
	case silent >= cfg.MembersWait:
		return verdictNobodyReached
	}
	return verdictRetry
}

// Why a dump did not load, as classifyFailure reads it.
var (
	// errPeerRecovering: the peer answered 503 not_ready: it is
	// recovering its own index.
	errPeerRecovering = errors.New("peer is recovering its own index")
	// errPeerUnreachable: the peer did not answer (no connection, no
	// header in time).
	errPeerUnreachable = errors.New("peer unreachable")
	// errPeerRefused: the peer answered a 4xx; asking again will not
	// change it.
	errPeerRefused = errors.New("peer refused the dump")
	// errNothingPlaced: a dump loaded, but every event in it was for a
	// partition or rank this node's catalog does not hold yet.
	errNothingPlaced = errors.New("no event of the dump could be placed")
	// errLeaderLogPending: a member whose address comes with the
	// leader's log, which is on its way.
	errLeaderLogPending = errors.New("HTTP address not known yet; waiting for the leader's log")
)

// classifyFailure is the peerState of an ask whose load failed with err.
func classifyFailure(err error) peerState {
	switch {
	case errors.Is(err, errPeerRecovering):
		return peerRecovering
	case errors.Is(err, errPeerUnreachable), errors.Is(err, errPeerRefused):
		return peerUnreachable
	}
	return peerServing
}

// leaderLogPending reports whether a leader is known and this node has
// not yet caught up with it: hashicorp/raft starts every node at commit
// index 0 and a follower learns the leader's only with an append
// (heartbeats carry none), so a restarted node that has heard heartbeats
// but no append yet has commit index 0.
func leaderLogPending(leader string, commit, applied uint64) bool {
	return leader != "" && (commit == 0 || applied < commit)
}
