package indexer

import "sync"

// matchLock keeps matches out of a partition's index while it changes.
// Matches hold it shared; the one writer (writers are serialised by the
// partition's apply mutex) holds it exclusively, in steps (writeSteps).
type matchLock struct {
	rw sync.RWMutex
}

func (l *matchLock) RLock()   { l.rw.RLock() }
func (l *matchLock) RUnlock() { l.rw.RUnlock() }
func (l *matchLock) Lock()    { l.rw.Lock() }
func (l *matchLock) Unlock()  { l.rw.Unlock() }

// yield lets waiting matches in (a pending writer blocks new readers, and
// unlocking wakes the waiting ones), then takes the lock again.
func (l *matchLock) yield() {
	l.rw.Unlock()
	l.rw.Lock()
}

// stepChanges bounds the membership changes a writer makes per hold of
// the match lock, so a match waits for at most one step (a few
// microseconds) however long the batch, event or rank removal is.
const stepChanges = 16

// writeSteps is how a writer, already holding its partition's apply
// mutex, holds the match lock: from the first change a match could see
// until release, and never for more than stepChanges changes in a row.
// Every place that changes what a match reads calls change first, at a
// point where the index's invariants hold, since a match may run there.
type writeSteps struct {
	mu      *matchLock // nil: the index is used without locks (tests)
	held    bool
	changes int
}

// change is called before each change a match could see.
func (s *writeSteps) change() {
	if s.mu == nil {
		return
	}
	if !s.held {
		s.mu.Lock()
		s.held, s.changes = true, 1
		return
	}
	if s.changes++; s.changes > stepChanges {
		s.mu.yield()
		s.changes = 1
	}
}

// release ends the current step, if any.
func (s *writeSteps) release() {
	if s.held {
		s.held = false
		s.mu.Unlock()
	}
}
