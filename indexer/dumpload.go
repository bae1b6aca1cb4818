package indexer

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/kvselect/kvselect/api"
	"github.com/kvselect/kvselect/fsm"
)

// LoadStats reports what loading a dump applied.
type LoadStats struct {
	// Partitions loaded, and partitions skipped whole (unknown here, or
	// another block size).
	Partitions, SkippedPartitions int
	// Events applied, and events skipped (unknown rank or tier, not a
	// stored event, rejected by the index).
	Events, Skipped int
	Blocks          int
	// Watermarks set.
	Watermarks int
}

// LoadPartitionDump applies one partition's dump (already decoded) to the
// local index and sets each rank's watermark. Events of ranks this node
// does not index are skipped. A block size that differs from the local partition's is an
// error: the dump's block hashes would be meaningless here.
func (x *Indexer) LoadPartitionDump(key fsm.PartitionKey, d *PartitionDump) (LoadStats, error) {
	var st LoadStats
	x.mu.RLock()
	p := x.parts[key]
	x.mu.RUnlock()
	if p == nil {
		return st, fmt.Errorf("%w: %s", ErrUnknownPartition, key)
	}
	p.mu.RLock()
	bs := p.blockSize
	p.mu.RUnlock()
	if d.BlockSize != bs {
		return st, fmt.Errorf("%w: block size %d, partition %s has %d", ErrBadDump, d.BlockSize, key, bs)
	}
	var b dumpBatch
	for i := range d.Events {
		b.add(&d.Events[i])
	}
	x.applyDumpBatch(key, d.BlockSize, &b, &st, nil)
	st.Watermarks += x.setWatermarks(key, d.Watermarks, nil)
	st.Partitions++
	return st, nil
}

// LoadOptions tunes LoadDump.
type LoadOptions struct {
	// Progress, when set, is called after every applied batch with the
	// totals so far (from the loading goroutine; keep it short).
	Progress func(LoadStats)
	// BatchBlocks is how many blocks are applied under one acquisition of
	// the partition's apply mutex (default 4096). Matches are not held up
	// by it: they wait for one step of the batch at most (writeSteps).
	BatchBlocks int
	// MaxValueBytes bounds one JSON value of the dump (default
	// MaxDumpValueBytes).
	MaxValueBytes int64
}

// LoadDump reads a whole dump (GET /dump's body: partitions keyed by
// "<model>:<tenant>") from r and applies it to the local index as it
// streams in: json.Decoder tokens for the structure, one RouterEvent
// decoded at a time, events applied in batches. Memory holds one batch,
// never the document.
//
// Each entry's partition is its model_name and tenant_id, or, in a dump
// without them (Dynamo's standalone indexer), api.SplitDumpKey of its key.
// block_size, and model_name and tenant_id when present, must precede the
// entry's events (kvselect and Dynamo write them first). A partition this
// node does not have, or has with another block size, is skipped whole and
// counted; so are events of ranks it does not index.
//
// LoadDump is meant for an index whose ranks hold nothing yet (startup
// recovery, with the KV event listeners held). When it fails — malformed
// JSON, a stream cut short, ctx cancelled — it clears every rank it has
// touched (blocks and watermark), which restores exactly that empty
// state, so the caller can load another peer's dump from scratch.
func (x *Indexer) LoadDump(ctx context.Context, r io.Reader, opt LoadOptions) (LoadStats, error) {
	if opt.BatchBlocks <= 0 {
		opt.BatchBlocks = 4096
	}
	if opt.MaxValueBytes <= 0 {
		opt.MaxValueBytes = MaxDumpValueBytes
	}
	l := &dumpLoader{x: x, ctx: ctx, in: &valueBudget{r: r, limit: opt.MaxValueBytes}, opt: opt, touched: map[RankKey]bool{}}
	l.dec = json.NewDecoder(l.in)
	err := l.document()
	if err != nil {
		x.resetRanks(l.touched)
		return l.st, err
	}
	return l.st, nil
}

// MaxDumpValueBytes bounds one JSON value of a dump (an event, a
// watermark list, an unknown field): json.Decoder holds a whole value in
// memory, so without it one forged value could take all of it. Dumps this
// package writes keep events to MaxDumpEventBlocks blocks (about 0.3 MiB).
const MaxDumpValueBytes = 64 << 20

// valueBudget is the dumpLoader's reader: it fails once more than limit
// bytes (plus a read-ahead allowance) have been read since the last arm,
// which the dumpLoader calls before each value it decodes.
type valueBudget struct {
	r           io.Reader
	read, limit int64
}

func (v *valueBudget) arm() { v.read = 0 }

func (v *valueBudget) Read(p []byte) (int, error) {
	if v.read > v.limit+64<<10 {
		return 0, fmt.Errorf("%w: a value of more than %d bytes", ErrBadDump, v.limit)
	}
	n, err := v.r.Read(p)
	v.read += int64(n)
	return n, err
}

// dumpLoader is one LoadDump's state.
type dumpLoader struct {
	x       *Indexer
	ctx     context.Context
	in      *valueBudget
	dec     *json.Decoder
	opt     LoadOptions
	st      LoadStats
	touched map[RankKey]bool
	batch   dumpBatch
	ev      RouterEvent // decoded into, reused
}

func (l *dumpLoader) fail(format string, args ...any) error {
	return fmt.Errorf("%w: %s (at byte %d)", ErrBadDump, fmt.Sprintf(format, args...), l.dec.InputOffset())
}

// token reads the next token; a read error (a stream cut short) keeps its
// cause, wrapped in ErrBadDump.
func (l *dumpLoader) token() (json.Token, error) {
	l.in.arm()
	t, err := l.dec.Token()
	if err != nil {
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return nil, fmt.Errorf("%w: %w", ErrBadDump, err)
	}
	return t, nil
}

func (l *dumpLoader) delim(want json.Delim) error {
	t, err := l.token()
	if err != nil {
		return err
	}
	if d, ok := t.(json.Delim); !ok || d != want {
		return l.fail("got %v, want %q", t, want)
	}
	return nil
}

func (l *dumpLoader) decode(v any) error {
	l.in.arm()
	if err := l.dec.Decode(v); err != nil {
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return fmt.Errorf("%w: %w", ErrBadDump, err)
	}
	return nil
}

// document reads {"<key>": {...}, ...} and then the end of the stream.
func (l *dumpLoader) document() error {
	if err := l.delim('{'); err != nil {
		return err
	}
	for l.dec.More() {
		t, err := l.token()
		if err != nil {
			return err
		}
		key, _ := t.(string)
		if err := l.partition(key); err != nil {
			return err
		}
	}
	if err := l.delim('}'); err != nil {
		return err
	}
	if _, err := l.dec.Token(); !errors.Is(err, io.EOF) {
		return l.fail("data after the dump")
	}
	return nil
}

// partEntry is what one entry has said about its partition so far.
type partEntry struct {
	key             string
	model, tenant   string
	blockSize       uint32
	hasBlockSize    bool
	resolved        bool // events have started: the partition is fixed
	part            fsm.PartitionKey
	skip            bool // the partition is not loadable here
	watermarks      []Watermark
	eventsSeen      bool
	watermarksFound bool
}

// resolve fixes the entry's partition: model_name and tenant_id when
// given, else the key split at its first ':'.
func (e *partEntry) resolve() {
	if e.resolved {
		return
	}
	e.resolved = true
	m, t := api.SplitDumpKey(e.key)
	if e.model != "" {
		m = e.model
	}
	if e.tenant != "" {
		t = e.tenant
	}
	e.part = fsm.PartitionKey{Model: m, Tenant: t}
}

// partition reads one entry: {"model_name", "tenant_id", "block_size",
// "events", "watermarks"}, unknown fields ignored.
func (l *dumpLoader) partition(key string) error {
	if err := l.delim('{'); err != nil {
		return err
	}
	e := &partEntry{key: key}
	for l.dec.More() {
		t, err := l.token()
		if err != nil {
			return err
		}
		field, _ := t.(string)
		switch field {
		case "model_name", "tenant_id":
			var v string
			if err := l.decode(&v); err != nil {
				return err
			}
			cur, used := &e.model, &e.part.Model
			if field == "tenant_id" {
				cur, used = &e.tenant, &e.part.Tenant
			}
			if e.resolved && v != "" && v != *used {
				// Its events went to another partition already.
				return l.fail("entry %q: %s %q after its events", key, field, v)
			}
			*cur = v
		case "block_size":
			var v uint32
			if err := l.decode(&v); err != nil {
				return err
			}
			if e.resolved && v != e.blockSize {
				return l.fail("entry %q: block_size after its events", key)
			}
			e.blockSize, e.hasBlockSize = v, true
		case "events":
			if !e.hasBlockSize {
				return l.fail("entry %q: events before block_size", key)
			}
			e.resolve()
			l.checkPartition(e)
			if err := l.events(e); err != nil {
				return err
			}
		case "watermarks":
			// One per rank: small, and applied once the entry ends.
			var ws []Watermark
			if err := l.decode(&ws); err != nil {
				return err
			}
			e.watermarks = append(e.watermarks, ws...)
			e.watermarksFound = true
		default:
			var skip json.RawMessage
			if err := l.decode(&skip); err != nil {
				return err
			}
		}
	}
	if err := l.delim('}'); err != nil {
		return err
	}
	e.resolve()
	if !e.eventsSeen && e.hasBlockSize {
		l.checkPartition(e)
	}
	if e.skip || !e.hasBlockSize {
		l.st.SkippedPartitions++
		return nil
	}
	l.st.Watermarks += l.x.setWatermarks(e.part, e.watermarks, l.touched)
	l.st.Partitions++
	return nil
}

// checkPartition decides, once, whether the entry's partition can be
// loaded here: it exists with the same block size.
func (l *dumpLoader) checkPartition(e *partEntry) {
	if e.eventsSeen {
		return
	}
	e.eventsSeen = true
	l.x.mu.RLock()
	p := l.x.parts[e.part]
	l.x.mu.RUnlock()
	if p == nil {
		e.skip = true
		return
	}
	p.mu.RLock()
	e.skip = p.blockSize != e.blockSize
	p.mu.RUnlock()
}

// events reads an entry's event array, applying it in batches.
func (l *dumpLoader) events(e *partEntry) error {
	if err := l.delim('['); err != nil {
		return err
	}
	for l.dec.More() {
		l.ev = RouterEvent{}
		l.in.arm()
		if err := l.dec.Decode(&l.ev); err != nil {
			var te *json.UnmarshalTypeError
			if !errors.As(err, &te) {
				if errors.Is(err, io.EOF) {
					err = io.ErrUnexpectedEOF
				}
				return fmt.Errorf("%w: %w", ErrBadDump, err)
			}
			// A value of the wrong type (a rank past 2^32): the decoder
			// has read the whole event, so skip just it.
			l.st.Skipped++
			continue
		}
		if e.skip {
			l.st.Skipped++
			continue
		}
		l.batch.add(&l.ev)
		if len(l.batch.blocks) >= l.opt.BatchBlocks {
			if err := l.flush(e); err != nil {
				return err
			}
		}
	}
	if err := l.flush(e); err != nil {
		return err
	}
	return l.delim(']')
}

// flush applies the pending batch and reports progress.
func (l *dumpLoader) flush(e *partEntry) error {
	if err := l.ctx.Err(); err != nil {
		return fmt.Errorf("load dump: %w", err)
	}
	if len(l.batch.events) == 0 && l.batch.skipped == 0 {
		return nil
	}
	l.x.applyDumpBatch(e.part, e.blockSize, &l.batch, &l.st, l.touched)
	if l.opt.Progress != nil {
		l.opt.Progress(l.st)
	}
	return nil
}

// dumpBatch is a run of decoded dump events of one partition, converted to
// the index's own events, with the flat storage their blocks live in.
type dumpBatch struct {
	ranks   []RankKey
	events  []Event
	blocks  []StoredBlock
	skipped int // events that cannot apply anywhere (tier, kind)
}

// add converts one RouterEvent; events that are not stored events or name
// an unknown tier count as skipped.
func (b *dumpBatch) add(re *RouterEvent) {
	sd := re.Event.Data.Stored
	tier, err := ParseTier(re.StorageTier)
	if err != nil || sd == nil {
		b.skipped++
		return
	}
	ev := Event{Kind: EventStored, Tier: tier, HasParent: sd.ParentHash != nil}
	if sd.ParentHash != nil {
		ev.Parent = *sd.ParentHash
	}
	start := len(b.blocks)
	for _, blk := range sd.Blocks {
		b.blocks = append(b.blocks, StoredBlock{Hash: blk.BlockHash, Local: blk.TokensHash})
	}
	// Blocks are sliced out once the batch is complete: appends may move
	// the flat array.
	ev.Blocks = b.blocks[start:len(b.blocks):len(b.blocks)]
	b.events = append(b.events, ev)
	b.ranks = append(b.ranks, RankKey{Worker: re.WorkerID, Rank: re.Event.DPRank})
}

func (b *dumpBatch) clear() {
	b.ranks, b.events, b.blocks, b.skipped = b.ranks[:0], b.events[:0], b.blocks[:0], 0
}

// applyDumpBatch applies a batch to a partition under one hold of its
// apply mutex and clears it. Every event of a partition that is gone or
// has another block size now (the catalog moved on during the load) is
// skipped. touched, when not nil, collects the ranks that changed.
func (x *Indexer) applyDumpBatch(key fsm.PartitionKey, blockSize uint32, b *dumpBatch, st *LoadStats, touched map[RankKey]bool) {
	defer b.clear()
	st.Skipped += b.skipped
	// The blocks of each event, re-sliced from the final flat array.
	off := 0
	for i := range b.events {
		n := len(b.events[i].Blocks)
		b.events[i].Blocks = b.blocks[off : off+n : off+n]
		off += n
	}
	x.mu.RLock()
	p := x.parts[key]
	x.mu.RUnlock()
	if p == nil {
		st.Skipped += len(b.events)
		return
	}
	p.lockApply()
	defer p.unlockApply()
	if p.blockSize != blockSize {
		st.Skipped += len(b.events)
		return
	}
	var as ApplyStats
	for i := range b.events {
		r, ok := p.ix.byRank[b.ranks[i]]
		if !ok {
			st.Skipped++
			continue
		}
		before := as.BlocksStored
		o := p.ix.applyEvent(r, &b.events[i], &as)
		p.ix.steps.release()
		if o != OutcomeOK {
			st.Skipped++
			continue
		}
		if touched != nil {
			touched[r.key] = true
		}
		st.Events++
		st.Blocks += as.BlocksStored - before
	}
}

// setWatermarks sets the watermarks of a partition's ranks that this node
// indexes and returns how many it set.
func (x *Indexer) setWatermarks(key fsm.PartitionKey, ws []Watermark, touched map[RankKey]bool) int {
	if len(ws) == 0 {
		return 0
	}
	x.mu.RLock()
	p := x.parts[key]
	x.mu.RUnlock()
	if p == nil {
		return 0
	}
	p.lockApply()
	defer p.unlockApply()
	n := 0
	for _, w := range ws {
		if r, ok := p.ix.byRank[RankKey{Worker: w.WorkerID, Rank: w.DPRank}]; ok {
			r.seq, r.hasSeq = w.Seq, true
			if touched != nil {
				touched[r.key] = true
			}
			n++
		}
	}
	return n
}

// resetRanks clears ranks back to empty: no blocks, no watermark.
func (x *Indexer) resetRanks(ranks map[RankKey]bool) {
	for rk := range ranks {
		x.withRank(rk, func(p *partition, r *rankState) {
			p.ix.clearRank(r)
			r.seq, r.hasSeq = 0, false
			p.ix.maybeCompact()
		})
	}
}
