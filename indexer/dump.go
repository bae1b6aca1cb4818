package indexer

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strconv"

	"github.com/kvselect/kvselect/api"
	"github.com/kvselect/kvselect/fsm"
)

// The dump's wire types are the API's (package api, SPEC §7): the Dynamo
// standalone indexer's recovery format plus per-rank watermarks. The
// aliases keep this package's code short.
type (
	Dump          = api.Dump
	PartitionDump = api.PartitionDump
	RouterEvent   = api.RouterEvent
	KVCacheEvent  = api.KVCacheEvent
	EventData     = api.EventData
	StoredData    = api.StoredData
	DumpBlock     = api.DumpBlock
	Watermark     = api.Watermark
)

// snapshot is one partition's dump in compact form: flat arrays of
// fixed-size records, 16 bytes per dumped block, about a fifth of what the
// index spends on it and a few times less than the JSON. It is taken under
// the partition's read lock, atomically with the watermarks, and rendered
// after the lock is released, so a slow reader of /dump never holds up the
// partition's writers.
type snapshot struct {
	key        fsm.PartitionKey
	blockSize  uint32
	events     []snapEvent
	blocks     []DumpBlock // events[i] owns blocks[events[i-1].end:events[i].end]
	watermarks []Watermark

	// Scratch of the traversal, reused from rank to rank.
	hashes  []memberHash
	members []snapMember
	stack   []frame
}

// snapEvent is one stored event of a snapshot.
type snapEvent struct {
	worker    uint64
	parent    uint64
	end       int
	rank      uint32
	tier      Tier
	hasParent bool
}

func (s *snapshot) reset(key fsm.PartitionKey, blockSize uint32) {
	s.key, s.blockSize = key, blockSize
	s.events, s.blocks, s.watermarks = s.events[:0], s.blocks[:0], s.watermarks[:0]
}

// start returns the index of the first block of event i.
func (s *snapshot) start(i int) int {
	if i == 0 {
		return 0
	}
	return s.events[i-1].end
}

// partitionsSorted returns the partitions in (model, tenant) order.
func (x *Indexer) partitionsSorted() []*partition {
	x.mu.RLock()
	parts := make([]*partition, 0, len(x.parts))
	for _, p := range x.parts {
		parts = append(parts, p)
	}
	x.mu.RUnlock()
	slices.SortFunc(parts, func(a, b *partition) int {
		return cmp.Or(cmp.Compare(a.key.Model, b.key.Model), cmp.Compare(a.key.Tenant, b.key.Tenant))
	})
	return parts
}

// take fills s with the partition's snapshot under its apply mutex, so
// it holds whole batches and matches their watermarks; matches go on
// meanwhile.
func (p *partition) take(s *snapshot) {
	p.lockApply()
	defer p.unlockApply()
	s.reset(p.key, p.blockSize)
	// One block per (hash, tier) is written: the tier memberships, plus
	// aliases. Sizing for them up front spares the copies of growth.
	n := 0
	for _, c := range p.ix.tierBlocks {
		n += c
	}
	s.blocks = slices.Grow(s.blocks, n)
	p.ix.snapshot(s)
}

// dumpOrder returns the partitions in the order a dump writes them, with
// their keys: api.DumpKeys (unique even when names hold ':'), sorted as
// strings, so the stream is byte for byte what encoding/json makes of
// Dump().
func (x *Indexer) dumpOrder() ([]*partition, []string) {
	parts := x.partitionsSorted()
	names := make([][2]string, len(parts))
	for i, p := range parts {
		names[i] = [2]string{p.key.Model, p.key.Tenant}
	}
	keys := api.DumpKeys(names)
	idx := make([]int, len(parts))
	for i := range idx {
		idx[i] = i
	}
	slices.SortFunc(idx, func(a, b int) int { return cmp.Compare(keys[a], keys[b]) })
	outP, outK := make([]*partition, len(parts)), make([]string, len(parts))
	for i, j := range idx {
		outP[i], outK[i] = parts[j], keys[j]
	}
	return outP, outK
}

// Dump snapshots every partition into memory. It is for tests and small
// indexes; GET /dump streams with WriteDump instead.
func (x *Indexer) Dump() Dump {
	parts, keys := x.dumpOrder()
	out := make(Dump, len(parts))
	for i, p := range parts {
		var s snapshot
		p.take(&s)
		out[keys[i]] = s.partitionDump()
	}
	return out
}

// partitionDump renders a snapshot as the API's structure.
func (s *snapshot) partitionDump() *PartitionDump {
	d := &PartitionDump{ModelName: s.key.Model, TenantID: s.key.Tenant, BlockSize: s.blockSize,
		Events: make([]RouterEvent, len(s.events)), Watermarks: slices.Clone(s.watermarks)}
	if d.Watermarks == nil {
		d.Watermarks = []Watermark{}
	}
	for i, e := range s.events {
		sd := &StoredData{Blocks: slices.Clone(s.blocks[s.start(i):e.end])}
		if e.hasParent {
			sd.ParentHash = &e.parent
		}
		d.Events[i] = RouterEvent{WorkerID: e.worker, StorageTier: e.tier.String(),
			Event: KVCacheEvent{EventID: uint64(i + 1), DPRank: e.rank, Data: EventData{Stored: sd}}}
	}
	return d
}

// DumpStats describes what WriteDump wrote.
type DumpStats struct {
	Partitions, Events, Blocks int
}

// WriteDump streams every partition's snapshot to w as GET /dump's JSON
// document (followed by a newline). Each partition is snapshotted under
// its lock into compact form, the lock is released, and the partition is
// written event by event, so memory holds one partition's snapshot at a
// time, never the document. The output is byte for byte json.Encoder's
// (HTML escaping off) rendering of Dump().
func (x *Indexer) WriteDump(ctx context.Context, w io.Writer) (DumpStats, error) {
	var st DumpStats
	parts, keys := x.dumpOrder()
	bw := bufio.NewWriterSize(w, 64<<10)
	jw := jsonWriter{w: bw}
	jw.raw("{")
	var s snapshot // buffers reused from partition to partition
	for i, p := range parts {
		if err := ctx.Err(); err != nil {
			return st, err
		}
		p.take(&s)
		if i > 0 {
			jw.raw(",")
		}
		jw.str(keys[i])
		jw.raw(":")
		s.write(&jw)
		if jw.err != nil {
			return st, fmt.Errorf("write dump: %w", jw.err)
		}
		st.Partitions++
		st.Events += len(s.events)
		st.Blocks += len(s.blocks)
	}
	jw.raw("}\n")
	if jw.err != nil {
		return st, fmt.Errorf("write dump: %w", jw.err)
	}
	if err := bw.Flush(); err != nil {
		return st, fmt.Errorf("write dump: %w", err)
	}
	return st, nil
}

// write renders the snapshot as one PartitionDump object.
func (s *snapshot) write(jw *jsonWriter) {
	jw.raw(`{"model_name":`)
	jw.str(s.key.Model)
	jw.raw(`,"tenant_id":`)
	jw.str(s.key.Tenant)
	jw.raw(`,"block_size":`)
	jw.uint(uint64(s.blockSize))
	jw.raw(`,"events":[`)
	for i, e := range s.events {
		if jw.err != nil {
			return
		}
		if i > 0 {
			jw.raw(",")
		}
		jw.raw(`{"worker_id":`)
		jw.uint(e.worker)
		jw.raw(`,"storage_tier":"`)
		jw.raw(e.tier.String())
		jw.raw(`","event":{"event_id":`)
		jw.uint(uint64(i + 1))
		jw.raw(`,"dp_rank":`)
		jw.uint(uint64(e.rank))
		jw.raw(`,"data":{"stored":{"parent_hash":`)
		if e.hasParent {
			jw.uint(e.parent)
		} else {
			jw.raw("null")
		}
		jw.raw(`,"blocks":[`)
		for j, b := range s.blocks[s.start(i):e.end] {
			if j > 0 {
				jw.raw(",")
			}
			jw.raw(`{"block_hash":`)
			jw.uint(b.BlockHash)
			jw.raw(`,"tokens_hash":`)
			jw.uint(b.TokensHash)
			jw.raw("}")
		}
		jw.raw("]}}}}")
	}
	jw.raw(`],"watermarks":[`)
	for i, wm := range s.watermarks {
		if i > 0 {
			jw.raw(",")
		}
		jw.raw(`{"worker_id":`)
		jw.uint(wm.WorkerID)
		jw.raw(`,"dp_rank":`)
		jw.uint(uint64(wm.DPRank))
		jw.raw(`,"seq":`)
		jw.uint(wm.Seq)
		jw.raw("}")
	}
	jw.raw("]}")
}

// jsonWriter writes JSON tokens to a buffered writer and keeps the first
// error, so the renderer reads as a list of writes.
type jsonWriter struct {
	w   *bufio.Writer
	num [20]byte
	err error
}

func (j *jsonWriter) raw(s string) {
	if j.err == nil {
		_, j.err = j.w.WriteString(s)
	}
}

func (j *jsonWriter) uint(v uint64) {
	if j.err == nil {
		_, j.err = j.w.Write(strconv.AppendUint(j.num[:0], v, 10))
	}
}

// str writes a JSON string as encoding/json does with HTML escaping off
// (model and tenant names: short, and rare enough to use the library).
func (j *jsonWriter) str(s string) {
	if j.err != nil {
		return
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if j.err = enc.Encode(s); j.err == nil {
		_, j.err = j.w.Write(bytes.TrimSuffix(buf.Bytes(), []byte("\n")))
	}
}

// snapshot renders the partition as stored events into s. Per rank,
// blocks are visited depth first from the root, so a parent always
// precedes its children, and runs of blocks on one tier become one event.
// A block whose parent the rank holds on no tier cannot be expressed (its
// parent hash is gone) and matches nothing for that rank, so it is left
// out with its subtree.
//
// The traversal sorts flat scratch arrays, reused from rank to rank,
// instead of building maps per rank: a dump of millions of blocks then
// leaves almost no garbage behind.
func (ix *partIndex) snapshot(s *snapshot) {
	for _, k := range ix.rankKeysSorted() {
		r := ix.byRank[k]
		if r.hasSeq {
			s.watermarks = append(s.watermarks, Watermark{WorkerID: k.Worker, DPRank: k.Rank, Seq: r.seq})
		}
		ix.snapshotRank(s, r)
	}
}

// memberHash is one engine hash of a rank's membership of a node.
type memberHash struct {
	id   nodeID
	hash uint64
}

// snapMember is one node a rank holds: its hashes are
// s.hashes[start:end], sorted, the first being the one its children name
// as their parent.
type snapMember struct {
	parent     nodeID
	id         nodeID
	start, end int
}

// frame is a member to visit, with the hash its blocks name as parent.
type frame struct {
	m         int
	parent    uint64
	hasParent bool
}

func (ix *partIndex) snapshotRank(s *snapshot, r *rankState) {
	// Every (node, hash) of the rank, grouped by node with hashes sorted.
	hs := s.hashes[:0]
	for h, id := range r.blocks.All() {
		hs = append(hs, memberHash{id, h})
	}
	slices.SortFunc(hs, func(a, b memberHash) int { return cmp.Or(cmp.Compare(a.id, b.id), cmp.Compare(a.hash, b.hash)) })
	ms := s.members[:0]
	for i := 0; i < len(hs); {
		j := i + 1
		for j < len(hs) && hs[j].id == hs[i].id {
			j++
		}
		ms = append(ms, snapMember{parent: ix.nodes.at(hs[i].id).parent, id: hs[i].id, start: i, end: j})
		i = j
	}
	// Siblings next to each other, ordered by their smallest hash.
	slices.SortFunc(ms, func(a, b snapMember) int {
		return cmp.Or(cmp.Compare(a.parent, b.parent), cmp.Compare(hs[a.start].hash, hs[b.start].hash))
	})
	children := func(id nodeID) (int, int) {
		lo, _ := slices.BinarySearchFunc(ms, id, func(m snapMember, id nodeID) int { return cmp.Compare(m.parent, id) })
		hi := lo
		for hi < len(ms) && ms[hi].parent == id {
			hi++
		}
		return lo, hi
	}
	stack := s.stack[:0]
	lo, hi := children(noNode)
	for i := hi - 1; i >= lo; i-- {
		stack = append(stack, frame{m: i})
	}
	for len(stack) > 0 {
		f := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		m := ms[f.m]
		local := ix.nodes.at(m.id).local
		for _, mh := range hs[m.start:m.end] {
			tiers := ix.hashTiers(r, m.id, mh.hash)
			for t := range numTiers {
				if tiers&(1<<t) != 0 {
					s.emit(r.key, t, f.hasParent, f.parent, DumpBlock{BlockHash: mh.hash, TokensHash: local})
				}
			}
		}
		lo, hi := children(m.id)
		for i := hi - 1; i >= lo; i-- {
			stack = append(stack, frame{m: i, parent: hs[m.start].hash, hasParent: true})
		}
	}
	s.hashes, s.members, s.stack = hs, ms, stack
}

// MaxDumpEventBlocks bounds the blocks of one dumped event: a longer chain
// continues in the next event (whose parent is the last block before it),
// so that no single JSON value of a dump is large (LoadDump bounds each).
const MaxDumpEventBlocks = 4096

// emit adds one block: to the last event when it continues that event's
// chain (same rank and tier, parent its last block) and has room, else as
// a new event.
func (s *snapshot) emit(rk RankKey, t Tier, hasParent bool, parent uint64, b DumpBlock) {
	if n := len(s.events); n > 0 {
		last := &s.events[n-1]
		if last.worker == rk.Worker && last.rank == rk.Rank && last.tier == t &&
			hasParent && s.blocks[last.end-1].BlockHash == parent && last.end-s.start(n-1) < MaxDumpEventBlocks {
			s.blocks = append(s.blocks, b)
			last.end++
			return
		}
	}
	s.blocks = append(s.blocks, b)
	s.events = append(s.events, snapEvent{worker: rk.Worker, rank: rk.Rank, tier: t,
		hasParent: hasParent, parent: parent, end: len(s.blocks)})
}
