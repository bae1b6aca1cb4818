package kvsim

// replayEntry is one published message as replay serves it again.
type replayEntry struct {
	seq     uint64
	payload []byte // immutable once built; shared with replay snapshots
}

// replayRing keeps the last capacity messages of a rank. Sequence numbers
// in the ring are consecutive (every assigned number is appended, whether
// or not it was published live), so a start sequence maps to an index by
// subtraction.
//
// Not safe for concurrent use; the owning rank's mutex guards it.
type replayRing struct {
	capacity int
	entries  []replayEntry // grows to capacity, then wraps
	head     int           // index of the oldest entry once full
}

func newReplayRing(capacity int) *replayRing {
	return &replayRing{capacity: capacity}
}

// add appends e, overwriting the oldest entry when full.
func (r *replayRing) add(e replayEntry) {
	if len(r.entries) < r.capacity {
		r.entries = append(r.entries, e)
		return
	}
	r.entries[r.head] = e
	r.head = (r.head + 1) % r.capacity
}

// since returns a copy of the entries with seq >= start, oldest first.
func (r *replayRing) since(start uint64) []replayEntry {
	n := len(r.entries)
	if n == 0 {
		return nil
	}
	oldest := r.entries[r.head].seq
	skip := 0
	if start > oldest {
		if start-oldest >= uint64(n) {
			return nil
		}
		skip = int(start - oldest)
	}
	out := make([]replayEntry, 0, n-skip)
	for i := skip; i < n; i++ {
		out = append(out, r.entries[(r.head+i)%n])
	}
	return out
}

// reset drops every entry and releases the memory.
func (r *replayRing) reset() {
	r.entries = nil
	r.head = 0
}

// len returns the number of buffered entries.
func (r *replayRing) len() int { return len(r.entries) }
