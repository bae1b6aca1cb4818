package kvsim

import (
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net"
	"sync"
	"time"

	"github.com/go-zeromq/zmq4"
)

// rankState is one data-parallel rank of a worker: its block cache, its
// sequence counter, its replay buffer and its two sockets.
//
// mu serialises every state change with publication, so that assigning a
// sequence number, appending to the replay buffer and queuing on the PUB
// socket are one step as seen by replay snapshots and by other callers.
type rankState struct {
	workerID  uint64
	rank      int
	blockSize int
	topic     []byte
	pub       zmq4.Socket
	router    zmq4.Socket
	replayEP  string       // this rank's replay endpoint (worker's base port + rank)
	withTopic bool         // replay replies carry the topic frame
	log       *slog.Logger // carries worker_id and dp_rank
	now       func() time.Time

	mu      sync.Mutex
	closed  bool
	cache   *blockCache
	enc     *batchEncoder
	nextSeq uint64 // sequence number of the next message
	skip    int    // messages still to keep off the PUB socket
	ring    *replayRing
}

// serve admits the prompt whose engine hashes are chain and whose tokens
// are tokens (at least len(chain) full blocks), publishing at most one
// message.
func (r *rankState) serve(tokens []uint32, chain []uint64) (ServeResult, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return ServeResult{}, ErrClosed
	}
	a := r.cache.admit(chain)
	res := ServeResult{
		Blocks:        len(chain),
		CachedBlocks:  a.hits,
		StoredBlocks:  len(a.stored),
		EvictedBlocks: len(a.evicted),
	}
	if len(a.stored) == 0 {
		return res, nil
	}
	events := make([]event, 0, 2)
	if len(a.evicted) > 0 {
		events = append(events, event{kind: kindRemoved, hashes: a.evicted})
	}
	stored := event{
		kind:      kindStored,
		hashes:    a.stored,
		tokens:    tokens[a.hits*r.blockSize : (a.hits+len(a.stored))*r.blockSize],
		blockSize: r.blockSize,
	}
	if a.hits > 0 {
		stored.parent, stored.hasParent = chain[a.hits-1], true
	}
	events = append(events, stored)
	return res, r.publishLocked(events)
}

// reset empties the cache and announces it with AllBlocksCleared.
func (r *rankState) reset() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return ErrClosed
	}
	r.cache.clear()
	return r.publishLocked([]event{{kind: kindCleared}})
}

// restart forgets everything an engine loses when it restarts: the cache
// (silently), the sequence counter and the replay buffer.
func (r *rankState) restart() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return ErrClosed
	}
	r.cache.clear()
	r.ring.reset()
	r.nextSeq = 0
	r.skip = 0
	return nil
}

func (r *rankState) skipLive(n int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.skip = min(r.skip, math.MaxInt-n) + n // saturating
}

func (r *rankState) lastSeq() (uint64, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.nextSeq == 0 {
		return 0, false
	}
	return r.nextSeq - 1, true
}

func (r *rankState) cachedBlocks() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.cache.len()
}

// replaySince snapshots the buffered messages with seq >= start.
func (r *rankState) replaySince(start uint64) []replayEntry {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.ring.since(start)
}

// close marks the rank closed so that no later call publishes, then closes
// its sockets. The caller waits for the replay goroutine.
func (r *rankState) close() error {
	r.mu.Lock()
	r.closed = true
	r.mu.Unlock()
	return errors.Join(closeSocket(r.pub), closeSocket(r.router))
}

// closeSocket closes a zmq4 socket. zmq4 reports connections that its own
// goroutines already closed (once the socket's context is cancelled) as
// errors; those are not failures of the close.
func closeSocket(s zmq4.Socket) error {
	if err := s.Close(); err != nil && !errors.Is(err, net.ErrClosed) {
		return err
	}
	return nil
}

// publishLocked encodes events as one batch, gives it the next sequence
// number, buffers it for replay and, unless it is to be skipped, queues it
// on the PUB socket. r.mu must be held.
func (r *rankState) publishLocked(events []event) error {
	ts := float64(r.now().UnixNano()) / 1e9
	payload, err := r.enc.encode(ts, events, r.rank)
	if err != nil {
		return fmt.Errorf("kvsim: worker %d rank %d: %w", r.workerID, r.rank, err)
	}
	seq := r.nextSeq
	r.nextSeq++
	r.ring.add(replayEntry{seq: seq, payload: payload})
	if r.skip > 0 {
		r.skip--
		r.log.Debug("message kept off the live stream", "seq", seq)
		return nil
	}
	// zmq4's PUB queues without blocking and drops past its high-water
	// mark; an error here means the socket is gone, which subscribers see
	// as a gap.
	if err := r.pub.SendMulti(zmq4.NewMsgFrom(r.topic, seqBytes(seq), payload)); err != nil {
		r.log.Warn("publish failed", "seq", seq, "err", err)
	}
	return nil
}

// seqBytes is the 8-byte big-endian sequence frame.
func seqBytes(seq uint64) []byte {
	b := make([]byte, 8)
	binary.BigEndian.PutUint64(b, seq)
	return b
}
