package cluster

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/kvselect/kvselect/fsm"
)

// watcher delivers catalog changes to the node's observer (which applies
// them to the indexer, scheduler and listeners) from one goroutine, outside
// the FSM, so slow side effects never stall raft. It is level-triggered:
// each wake-up diffs the last catalog it delivered against the current
// one, so coalesced notifications lose nothing.
type watcher struct {
	f        *fsm.FSM
	observer fsm.Observer
	log      *slog.Logger
	skipped  uint64 // entries skipped by the FSM, as last logged
	stop     chan struct{}
	done     chan struct{}

	mu      sync.Mutex
	last    *fsm.Catalog
	index   uint64        // catalog index whose side effects are done
	advance chan struct{} // closed and replaced when index moves
}

func newWatcher(f *fsm.FSM, observer fsm.Observer, log *slog.Logger) *watcher {
	return &watcher{
		f: f, observer: observer, log: log, last: fsm.EmptyCatalog(),
		stop: make(chan struct{}), done: make(chan struct{}), advance: make(chan struct{}),
	}
}

func (w *watcher) run() {
	defer close(w.done)
	w.deliver()
	for {
		select {
		case <-w.stop:
			return
		case <-w.f.Changed():
			w.deliver()
		}
	}
}

func (w *watcher) deliver() {
	cur := w.f.Catalog()
	w.mu.Lock()
	prev := w.last
	w.mu.Unlock()
	if cur == prev {
		return
	}
	if s := w.f.Skipped(); s != w.skipped {
		w.log.Warn("skipped log entries of a type this kvselect does not know (written by a newer version; upgrade this node)",
			"skipped", s-w.skipped, "catalog_index", cur.Index())
		w.skipped = s
	}
	if w.observer != nil {
		w.observer(fsm.NewChange(prev, cur))
	}
	w.mu.Lock()
	w.last, w.index = cur, cur.Index()
	close(w.advance)
	w.advance = make(chan struct{})
	w.mu.Unlock()
}

// coverPoll is how often wait asks covers again: raft does not tell when
// it applies an entry that is no command, so that case is polled.
const coverPoll = 5 * time.Millisecond

// wait blocks until the side effects of catalog index idx are done, or
// covers (when not nil) says the delivered catalog already stands for
// index idx.
func (w *watcher) wait(ctx context.Context, idx uint64, covers func(cat, idx uint64) bool) error {
	var poll <-chan time.Time
	for {
		w.mu.Lock()
		cat, ch := w.index, w.advance
		w.mu.Unlock()
		if cat >= idx || covers != nil && covers(cat, idx) {
			return nil
		}
		if poll == nil && covers != nil {
			t := time.NewTicker(coverPoll)
			defer t.Stop()
			poll = t.C
		}
		select {
		case <-ch:
		case <-poll:
		case <-w.done:
			return ErrClosed
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// changed returns a channel closed when the delivered index next moves.
func (w *watcher) changed() <-chan struct{} {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.advance
}

func (w *watcher) applied() uint64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.index
}

func (w *watcher) close() {
	close(w.stop)
	<-w.done
}
