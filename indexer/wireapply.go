package indexer

import "fmt"

// WireStats is what ApplyWire did with one decoded batch: the apply's own
// counts, and the events it dropped before applying.
type WireStats struct {
	ApplyStats
	// UnknownRank counts the batch's events when the rank they are for is
	// not indexed: all of them are dropped.
	UnknownRank int
	// WrongBlockSize counts stored events whose block_size is not their
	// partition's: their tokens cut into other blocks than the index's.
	WrongBlockSize int
}

// ApplyWire applies one decoded KV event batch, sequence number seq of rank
// rk's stream, and moves rk's watermark to seq. The events are for rk, or
// for the batch's data_parallel_rank of the same worker when it names one.
//
// The block size is checked in one place, under the partition's apply
// mutex, against the size the partition has then: stored events of
// another size are dropped and counted. Local hashes are computed before
// that, outside every lock, from each event's own block_size — the size
// a valid event has, so a valid event is hashed once, whatever happens
// to the partition meanwhile.
//
// It returns ErrUnknownRank when the events' rank is not indexed; rk's
// watermark still moves if rk is.
func (x *Indexer) ApplyWire(rk RankKey, seq uint64, b *WireBatch) (WireStats, error) {
	var st WireStats
	target := rk
	if b.HasDPRank {
		target.Rank = b.DPRank
	}
	evs := b.toEvents()
	// A worker's ranks all live in one partition: one hold covers the
	// events' rank and the watermark's.
	p := x.lockWorker(rk.Worker)
	if p == nil {
		st.UnknownRank = len(b.Events)
		return st, fmt.Errorf("%w: worker %d rank %d", ErrUnknownRank, target.Worker, target.Rank)
	}
	var outcomes [8]Outcome // most batches hold a handful of events
	out := outcomes[:0]
	r, known := p.ix.byRank[target]
	if known {
		evs, st.WrongBlockSize = b.keepBlockSize(evs, p.blockSize)
		out = p.applyEvents(r, evs, &st.ApplyStats, out)
	} else {
		st.UnknownRank = len(b.Events)
	}
	if w, ok := p.ix.byRank[rk]; ok {
		w.seq, w.hasSeq = seq, true
	}
	p.finishApply(&st.ApplyStats)
	if !known {
		return st, fmt.Errorf("%w: worker %d rank %d", ErrUnknownRank, target.Worker, target.Rank)
	}
	x.record(evs, out, &st.ApplyStats)
	return st, nil
}

// toEvents converts the batch's events one for one to index events,
// computing each stored block's local hash from its tokens (SPEC §6.1)
// for the event's own block_size. The result aliases the batch's scratch
// and is valid until the next conversion or Decode.
func (b *WireBatch) toEvents() []Event {
	events, blocks := b.events[:0], b.blocks[:0]
	for i := range b.Events {
		w := &b.Events[i]
		ev := Event{Kind: w.Kind, Tier: w.Tier}
		switch w.Kind {
		case EventStored:
			// The decoder checked len(Tokens) == len(Hashes)*BlockSize, so
			// the block size is at most the payload's length.
			bs := int(w.BlockSize)
			if cap(b.hbuf) < 4*bs {
				b.hbuf = make([]byte, 4*bs)
			}
			seed := LoraSeed(w.LoraName)
			lo := len(blocks)
			for j, h := range w.Hashes {
				local := hashTokens(b.hbuf, w.Tokens[j*bs:(j+1)*bs], seed)
				blocks = append(blocks, StoredBlock{Hash: h, Local: local})
			}
			ev.Blocks = blocks[lo:len(blocks):len(blocks)]
			ev.HasParent, ev.Parent = w.HasParent, w.Parent
		case EventRemoved:
			ev.Hashes = w.Hashes
		}
		events = append(events, ev)
	}
	// Appending may have moved blocks; re-slice every stored event onto
	// the final array.
	off := 0
	for i := range events {
		if n := len(events[i].Blocks); n > 0 {
			events[i].Blocks = blocks[off : off+n : off+n]
			off += n
		}
	}
	b.events, b.blocks = events, blocks
	return events
}

// keepBlockSize drops, in place, the stored events of evs (toEvents'
// result for b) whose block_size is not blockSize, and counts them.
func (b *WireBatch) keepBlockSize(evs []Event, blockSize uint32) (kept []Event, invalid int) {
	kept = evs[:0]
	for i := range evs {
		if w := &b.Events[i]; w.Kind == EventStored && w.BlockSize != int64(blockSize) {
			invalid++
			continue
		}
		kept = append(kept, evs[i])
	}
	return kept, invalid
}
