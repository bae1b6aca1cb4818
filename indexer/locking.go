package indexer

import "sync"

// stepChanges bounds the membership changes a writer makes per hold of
// the match lock, so a match waits for at most one step (a few
// microseconds) however long the batch, event or rank removal is.
const stepChanges = 16

// writeSteps is how a writer, already holding its partition's apply
// mutex, holds the partition's match lock (partition.mu, a sync.RWMutex
// that Match holds shared): from the first change a match could see until
// release, and never for more than stepChanges changes in a row. Every
// place that changes what a match reads calls change first, at a point
// where the index's invariants hold, since a match may run there.
//
// Between steps the writer yields: Unlock, then Lock. That lets in every
// match that blocked in RLock during the step before the writer holds the
// lock again, because of how sync.RWMutex counts readers
// (src/sync/rwmutex.go, Go 1.26). A blocked RLock has already added itself
// to readerCount, which a held write lock keeps negative. Unlock "announce[s]
// to readers there is no active writer" by adding the writer's bias back,
// which leaves readerCount at the number of those readers, and releases
// each of them ("Unblock blocked readers, if any"). The next Lock takes
// that count as the readers it must wait for ("Wait for active readers")
// and sleeps until the last of them has called RUnlock, whether or not
// they had been scheduled yet. Matches that arrive after that Lock wait
// for the end of the next step: "a blocked Lock call excludes new readers
// from acquiring the lock". So a match waits for at most the step under
// way and the matches let in ahead of it, never for a whole batch, and a
// writer that never pauses cannot keep it out (Test_StepsLetBlockedMatchIn).
// The package documentation promises less (each RLock falls between some
// Unlock and the next Lock, not necessarily the first Unlock after it
// blocked); the test would notice if that changed. The price is a
// wake-up per hand-over: each released match is a futex wake-up away, and
// the writer sleeps until the last of them is done.
type writeSteps struct {
	mu      *sync.RWMutex // nil: the index is used without locks (tests)
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
		s.mu.Unlock() // yield: see writeSteps
		s.mu.Lock()
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
