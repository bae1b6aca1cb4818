package indexer

import (
	"fmt"
	"sync"
)

// partLock is a partition's match lock: Match holds it shared; the
// partition's one writer, holding apply, holds it exclusively in steps
// (writeSteps). It is a seam so that the polling matchLock can be measured
// against a plain sync.RWMutex in the same run: the polling lock is worth
// its complexity only while it beats its twin (BenchmarkMatchUnderApply,
// and make bench's gate on it; see DESIGN.md).
type partLock interface {
	RLock()
	RUnlock()
	Lock()
	Unlock()
	// yield, called by the writer between steps, lets the matches waiting
	// for it in before it takes the lock again.
	yield()
}

// MatchLock names the lock an Indexer's partitions use (WithMatchLock).
type MatchLock string

const (
	// PollingLock is matchLock: both sides poll before they park, and a
	// parked match is handed the lock once it was passed over.
	PollingLock MatchLock = "polling"
	// RWMutexLock is a plain sync.RWMutex.
	RWMutexLock MatchLock = "rwmutex"
)

// DefaultMatchLock is the lock New gives partitions: the one that won
// BenchmarkMatchUnderApply on the shared 2-core VM. The polling lock's
// match p99 was lower in only 16 of 30 runs, and up to 6.8x the twin's in
// the others, though its applier always got further (DESIGN.md has the
// figures).
const DefaultMatchLock = RWMutexLock

// MatchLocks lists every MatchLock.
var MatchLocks = []MatchLock{PollingLock, RWMutexLock}

// Option configures an Indexer.
type Option func(*Indexer)

// WithMatchLock makes every partition of the Indexer use lock k. It panics
// on an unknown k: the choice is made in code, not read from input.
func WithMatchLock(k MatchLock) Option {
	newPartLock(k)
	return func(x *Indexer) { x.lockKind = k }
}

func newPartLock(k MatchLock) partLock {
	switch k {
	case PollingLock:
		return new(matchLock)
	case RWMutexLock:
		return new(rwLock)
	}
	panic(fmt.Sprintf("indexer: unknown match lock %q", k))
}

// rwLock is matchLock's plain twin. Its Unlock hands the lock to every
// match blocked in RLock before a Lock can take it back, so yielding needs
// nothing more than releasing and taking it again.
type rwLock struct{ sync.RWMutex }

func (l *rwLock) yield() {
	l.Unlock()
	l.Lock()
}
