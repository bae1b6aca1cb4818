package indexer

import (
	"runtime"
	"sync"
	"sync/atomic"
	"time"
)

// matchLock keeps matches out of a partition's index while it changes.
// Matches hold it shared; the one writer (writers are serialised by the
// partition's apply mutex) holds it exclusively, in steps (writeSteps).
//
// Either side waits for the other by polling, since what it waits for is
// short: a writer's step is a few microseconds, and so is a match. A
// sync.RWMutex parks the waiter at once instead, and each handoff then
// costs a futex wake-up of tens of microseconds on a VM (more when the
// woken goroutine is queued behind the busy one that woke it): matches
// under a 1 M blocks/s apply took 5-7x their quiet p99, most of it in
// handoffs. A waiter that has polled for spinFor (the other side's thread
// was descheduled, say) parks on a condition variable until the state
// changes.
//
// Entry is Dekker's: a reader counts itself in, then checks for the
// writer; the writer announces itself, then checks for readers. Go's
// atomics are sequentially consistent, so at least one of them sees the
// other and backs off. An announced writer stops new readers, so it waits
// for at most the matches already running. A reader waits for at most
// the step under way: between events the writer is out of the lock while
// it checks the next one, and within a long change it yields.
type matchLock struct {
	readers atomic.Int32 // matches inside
	writer  atomic.Bool  // the writer holds the lock or is waiting for it
	waiting atomic.Int32 // matches waiting for the writer

	sleepers atomic.Int32 // waiters parked on cond
	mu       sync.Mutex   // guards cond
	cond     sync.Cond
}

// spinFor bounds how long a waiter polls before it parks: several steps or
// matches, short against the time slices of a loaded machine. (Polling
// for longer made matches slower on the loaded 2-core VM: a thread that
// polls for a descheduled one takes the CPU the other needs.)
const spinFor = 50 * time.Microsecond

func (l *matchLock) RLock() {
	if l.enter() {
		return
	}
	l.waiting.Add(1)
	for {
		l.wait(func() bool { return !l.writer.Load() })
		if l.enter() {
			break
		}
	}
	l.waiting.Add(-1)
}

// enter counts a reader in unless a writer is there.
func (l *matchLock) enter() bool {
	if l.writer.Load() {
		return false
	}
	l.readers.Add(1)
	if !l.writer.Load() {
		return true
	}
	l.RUnlock()
	return false
}

func (l *matchLock) RUnlock() {
	if l.readers.Add(-1) == 0 && l.writer.Load() {
		l.wake()
	}
}

// Lock takes the lock for the writer. Only one goroutine may hold or
// wait for it at a time.
func (l *matchLock) Lock() {
	l.writer.Store(true)
	l.wait(func() bool { return l.readers.Load() == 0 })
}

func (l *matchLock) Unlock() {
	l.writer.Store(false)
	l.wake()
}

// yield lets the matches waiting for the writer in, then takes the lock
// again. It waits for them to get in only while they are polling, for up
// to spinFor, so a stream of new matches cannot hold the writer off. A
// parked one is left to its wake-up: waiting for it made the writer poll
// on the very P the woken match was queued on, 50 us an event, and the
// applier fell to a fifth of its rate.
func (l *matchLock) yield() {
	if l.waiting.Load() == 0 {
		return
	}
	l.Unlock()
	poll(func() bool { return l.waiting.Load() <= l.sleepers.Load() })
	l.Lock()
}

// wait returns once ready does: it polls for up to spinFor, then parks
// until a change of state (wake) makes ready true.
func (l *matchLock) wait(ready func() bool) {
	if poll(ready) {
		return
	}
	l.mu.Lock()
	if l.cond.L == nil {
		l.cond.L = &l.mu
	}
	// Counting itself in before the last check, under mu, means a waker
	// that changed the state after the check sees the count and, taking
	// mu, broadcasts only once this waiter is inside Wait.
	l.sleepers.Add(1)
	for !ready() {
		l.cond.Wait()
	}
	l.sleepers.Add(-1)
	l.mu.Unlock()
}

// poll reports whether ready became true within spinFor. It keeps its P:
// yielding it (runtime.Gosched) let the goroutine it waits for move onto
// it, and the two then took turns on one P. With a single P, the other
// side cannot run meanwhile, so it does not poll at all.
func poll(ready func() bool) bool {
	if ready() {
		return true
	}
	if runtime.GOMAXPROCS(0) == 1 {
		return false
	}
	start := time.Now()
	for i := 1; ; i++ {
		if ready() {
			return true
		}
		if i%64 == 0 && time.Since(start) >= spinFor {
			return false
		}
	}
}

// wake wakes parked waiters after a change of state.
func (l *matchLock) wake() {
	if l.sleepers.Load() > 0 {
		l.mu.Lock()
		l.cond.Broadcast()
		l.mu.Unlock()
	}
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
