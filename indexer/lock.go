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
// for at most the matches already running. A polling reader waits for
// about the step under way: between events the writer is out of the lock
// while it checks the next one, and within a long change it yields.
//
// A parked reader needs more: woken by Unlock, it may not run before the
// writer takes the lock again nanoseconds later (always so with one P),
// and it would park again for as long as applies keep coming (a review
// measured 2.7 s at GOMAXPROCS 1, 75 ms at 2). So once a woken reader has
// found the writer back in (starved), Unlock hands the lock to the
// readers parked at that moment (pass): the writer does not take it again
// until as many parked readers have got in. Readers that only polled are
// never waited for, so matches streaming in cannot hold the writer off,
// and the writer pays for a hand-off only after a reader was passed over
// once (waiting for every woken reader cut the applier to a fifth; with
// one P, handing off at every Unlock made the concurrency test 300 times
// slower). With one P a woken reader runs only once the writer is
// preempted, so it waits about two scheduler slices (20 ms; 40-140 ms at
// worst on the loaded 2-core VM) under a writer that never pauses, instead
// of for as long as applies come; with two Ps, well under a millisecond
// (4 ms at worst).
//
// Hand-off. Lock waits for pass to reach zero, and only readers that had
// parked count it down (passed), once each, after they got in. So every
// pass Unlock stores must be counted down, and Unlock stores it while the
// writer still holds the lock, before writer=false. A reader Unlock
// counted in parked was between parked.Add(1) and parked.Add(-1) when
// Unlock read parked, the writer in; it gets in only by reading
// writer=false after that, which is Unlock's store, after the store of
// pass: its passed() sees the pass. And the writer announces itself again
// only once pass is zero, so every counted reader does get in: pass is
// zero at the latest when the last of them has passed. (Storing
// writer=false first let a counted reader get in, find pass still zero
// and leave; the pass stored after it was never consumed and the writer's
// next Lock waited forever, holding the partition's apply mutex.) Readers
// Unlock did not count, ones that parked after it read parked, count pass
// down too; the writer then locks again before some counted readers got
// in, and they are passed over once more. That costs fairness, never
// correctness: pass lets no reader in (entry is Dekker's alone), it never
// goes below zero (passed only takes a positive one), and only the writer
// raises it, in Unlock, where it is zero (Lock waited for that).
type matchLock struct {
	readers atomic.Int32 // matches inside
	writer  atomic.Bool  // the writer holds the lock or is waiting for it
	waiting atomic.Int32 // matches waiting for the writer

	sleepers atomic.Int32 // waiters parked on cond
	mu       sync.Mutex   // guards cond
	cond     sync.Cond

	parked  atomic.Int32 // readers parked on cond
	starved atomic.Int32 // readers that woke and still found the writer in
	pass    atomic.Int32 // parked readers the writer lets in before it locks again

	beforePass func() // test hook: runs in Unlock between reading parked and storing pass
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
	noWriter := func() bool { return !l.writer.Load() }
	parked, starved := false, false
	for {
		if !poll(noWriter) {
			// Parked, it returns after each wake-up, so that one that
			// finds the writer back in counts as starved below.
			parked = true
			l.parked.Add(1)
			l.parkOnce(noWriter)
			l.parked.Add(-1)
		}
		if l.enter() {
			break
		}
		if parked && !starved {
			starved = true
			l.starved.Add(1)
		}
	}
	l.waiting.Add(-1)
	if starved {
		l.starved.Add(-1)
	}
	if parked {
		l.passed()
	}
}

// passed counts a reader that had parked as let in (pass), waking the
// writer when it was the last one it waited for.
func (l *matchLock) passed() {
	for {
		p := l.pass.Load()
		if p <= 0 {
			return
		}
		if l.pass.CompareAndSwap(p, p-1) {
			if p == 1 {
				l.wake()
			}
			return
		}
	}
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
	if l.pass.Load() > 0 {
		l.wait(func() bool { return l.pass.Load() <= 0 })
	}
	l.writer.Store(true)
	l.wait(func() bool { return l.readers.Load() == 0 })
}

func (l *matchLock) Unlock() {
	if n := l.parked.Load(); n > 0 && l.starved.Load() > 0 {
		if l.beforePass != nil {
			l.beforePass()
		}
		l.pass.Store(n) // before writer=false: see Hand-off in matchLock's comment
	}
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
	if !poll(ready) {
		l.park(ready)
	}
}

// parkOnce blocks on cond until the next wake-up, unless ready already.
func (l *matchLock) parkOnce(ready func() bool) {
	l.mu.Lock()
	if l.cond.L == nil {
		l.cond.L = &l.mu
	}
	l.sleepers.Add(1) // before the check: see park
	if !ready() {
		l.cond.Wait()
	}
	l.sleepers.Add(-1)
	l.mu.Unlock()
}

// park blocks on cond until ready.
func (l *matchLock) park(ready func() bool) {
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
	mu      partLock // nil: the index is used without locks (tests)
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
