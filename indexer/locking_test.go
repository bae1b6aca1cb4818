package indexer

import (
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
)

// Test_StepsExclude has a writer change two plain counters in events of 40
// changes, through writeSteps (so it yields every stepChanges), while
// readers check under the shared lock that the two agree. The race
// detector reports any access the steps fail to order. It runs at 1, 2
// and 4 Ps.
func Test_StepsExclude(t *testing.T) {
	const events, changes = 2000, 40
	for _, procs := range []int{1, 2, 4} {
		t.Run(fmt.Sprintf("%dP", procs), func(t *testing.T) {
			defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(procs))
			var l sync.RWMutex
			var a, b int
			var done atomic.Bool
			var wg sync.WaitGroup
			for range 3 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := 0; i < 2000 || !done.Load(); i++ {
						l.RLock()
						if a != b {
							t.Errorf("reader saw a=%d b=%d", a, b)
						}
						l.RUnlock()
					}
				}()
			}
			s := writeSteps{mu: &l}
			for range events {
				for range changes {
					s.change() // may yield: a and b agree here
					a++
					b++
				}
				s.release()
			}
			done.Store(true)
			wg.Wait()
			if a != events*changes || b != events*changes {
				t.Fatalf("a=%d b=%d", a, b)
			}
		})
	}
}

// Test_StepsLetBlockedMatchIn: a writer that never pauses, taking the lock
// again nanoseconds after each release, must not keep a blocked match out
// for as long as it runs. Each yield (Unlock, Lock) must let in the
// matches blocked in RLock during the step (see writeSteps). The reader
// must get in readerRounds times before the writer has made maxEvents
// events. (The polling lock, before it handed the lock to parked readers,
// let one in about once per 750 k events at one P.)
func Test_StepsLetBlockedMatchIn(t *testing.T) {
	const readerRounds, maxEvents = 20, 10_000_000
	for _, procs := range []int{1, 2} {
		t.Run(fmt.Sprintf("%dP", procs), func(t *testing.T) {
			defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(procs))
			var l sync.RWMutex
			var reads atomic.Int32
			events := make(chan int, 1)
			go func() {
				s := writeSteps{mu: &l}
				x, n := 0, 0
				for ; n < maxEvents && int(reads.Load()) < readerRounds; n++ {
					for range 40 { // one event, yielding every stepChanges
						s.change()
						for j := range 200 {
							x += j
						}
					}
					s.release()
				}
				_ = x
				events <- n
			}()
			for int(reads.Load()) < readerRounds {
				l.RLock()
				l.RUnlock()
				reads.Add(1)
				runtime.Gosched()
			}
			if n := <-events; n >= maxEvents {
				t.Fatalf("the writer made all %d events before the reader got in %d times", n, readerRounds)
			} else {
				t.Logf("%d reads during %d events", readerRounds, n)
			}
		})
	}
}
