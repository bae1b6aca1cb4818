package kvsim

import (
	"errors"
	"fmt"
	"maps"

	"github.com/go-zeromq/zmq4"

	"github.com/kvselect/kvselect/api"
)

// Errors returned by Worker methods.
var (
	// ErrClosed is returned once the Sim has been closed.
	ErrClosed = errors.New("kvsim: closed")
	// ErrUnknownRank is returned for a dp rank outside 0..DPSize-1.
	ErrUnknownRank = errors.New("kvsim: unknown dp rank")
)

// AllRanks, passed as the rank to Reset or Restart, applies it to every
// rank of the worker.
const AllRanks = -1

// ServeResult reports what serving one prompt did on one rank, in blocks.
type ServeResult struct {
	Blocks        int `json:"blocks"`         // full blocks in the prompt
	CachedBlocks  int `json:"cached_blocks"`  // leading blocks that were already cached
	StoredBlocks  int `json:"stored_blocks"`  // blocks newly cached (BlockStored)
	EvictedBlocks int `json:"evicted_blocks"` // blocks evicted to make room (BlockRemoved)
}

// Worker is one simulated inference worker with DPSize ranks. Its methods
// are safe for concurrent use; calls on one rank are serialised.
type Worker struct {
	id        uint64
	blockSize int
	ranks     []*rankState
	reg       api.WorkerSpec
}

// ID returns the worker id.
func (w *Worker) ID() uint64 { return w.id }

// Registration returns the worker's registration with kvselect: its
// endpoint is Config.EndpointBase/workers/{id} (kvsim://host/workers/{id}
// without one; kvselect never calls it, its callers do), each dp rank has
// its PUB endpoint, and the replay endpoint is rank 0's ROUTER (rank r
// listens on its port + r).
func (w *Worker) Registration() api.WorkerSpec {
	reg := w.reg
	reg.KVEventsEndpoints = maps.Clone(w.reg.KVEventsEndpoints)
	return reg
}

// Serve runs a prompt on a rank: leading blocks already cached are hits;
// the other full blocks are stored (evicting least recently used blocks
// first). A prompt that changes the cache publishes exactly one message,
// [BlockRemoved,] BlockStored; a full hit publishes nothing. Blocks beyond
// the cache capacity are counted but never stored.
func (w *Worker) Serve(rank int, tokens []uint32) (ServeResult, error) {
	r, err := w.rank(rank)
	if err != nil {
		return ServeResult{}, err
	}
	return r.serve(tokens, engineHashes(tokens, w.blockSize))
}

// Reset empties a rank's cache and publishes AllBlocksCleared. AllRanks
// resets every rank.
func (w *Worker) Reset(rank int) error {
	return w.eachRank(rank, (*rankState).reset)
}

// Restart simulates an engine restart on a rank (or AllRanks): the cache is
// emptied without any event, the replay buffer is emptied and the next
// message gets sequence number 0. Sockets stay bound, so subscribers see
// the sequence go backwards.
func (w *Worker) Restart(rank int) error {
	return w.eachRank(rank, (*rankState).restart)
}

// SkipLive keeps the next n messages of a rank off the PUB socket; they
// still get sequence numbers and go into the replay buffer, as if the
// network had lost them. An unknown rank or n <= 0 is ignored.
func (w *Worker) SkipLive(rank int, n int) {
	if r, err := w.rank(rank); err == nil && n > 0 {
		r.skipLive(n)
	}
}

// Subscribed reports whether a subscriber's subscription has reached the
// rank's PUB socket. ZMQ drops what a PUB sends before that, so a test
// that wants every message live waits for it.
func (w *Worker) Subscribed(rank int) bool {
	r, err := w.rank(rank)
	if err != nil {
		return false
	}
	t, ok := r.pub.(zmq4.Topics)
	return ok && len(t.Topics()) > 0
}

// LastSeq returns the last sequence number assigned on a rank, and false
// when none has been since start or the last Restart (or the rank is
// unknown).
func (w *Worker) LastSeq(rank int) (uint64, bool) {
	r, err := w.rank(rank)
	if err != nil {
		return 0, false
	}
	return r.lastSeq()
}

// CachedBlocks returns the number of blocks cached on a rank (0 for an
// unknown rank).
func (w *Worker) CachedBlocks(rank int) int {
	r, err := w.rank(rank)
	if err != nil {
		return 0
	}
	return r.cachedBlocks()
}

// EngineHashes returns the engine block hashes this worker would publish
// for the full blocks of tokens. They are the same on every rank.
func (w *Worker) EngineHashes(rank int, tokens []uint32) []uint64 {
	return engineHashes(tokens, w.blockSize)
}

func (w *Worker) rank(rank int) (*rankState, error) {
	if rank < 0 || rank >= len(w.ranks) {
		return nil, fmt.Errorf("%w: worker %d has no dp rank %d (dp size %d)", ErrUnknownRank, w.id, rank, len(w.ranks))
	}
	return w.ranks[rank], nil
}

// eachRank applies fn to one rank, or to every rank for AllRanks (stopping
// at the first error).
func (w *Worker) eachRank(rank int, fn func(*rankState) error) error {
	if rank != AllRanks {
		r, err := w.rank(rank)
		if err != nil {
			return err
		}
		return fn(r)
	}
	for _, r := range w.ranks {
		if err := fn(r); err != nil {
			return err
		}
	}
	return nil
}
