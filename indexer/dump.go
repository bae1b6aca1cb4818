package indexer

import (
	"cmp"
	"fmt"
	"github.com/kvselect/kvselect/api"
	"slices"

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

// Dump snapshots every partition.
func (x *Indexer) Dump() Dump {
	x.mu.RLock()
	parts := make([]*partition, 0, len(x.parts))
	for _, p := range x.parts {
		parts = append(parts, p)
	}
	x.mu.RUnlock()
	out := Dump{}
	for _, p := range parts {
		p.mu.RLock()
		out[p.key.String()] = p.ix.dump(p.blockSize)
		p.mu.RUnlock()
	}
	return out
}

// dump renders the partition as stored events. Per rank, blocks are
// visited depth first from the root, so a parent always precedes its
// children, and runs of blocks on one tier become one event. A block whose
// parent the rank holds on no tier cannot be expressed (its parent hash is
// gone) and matches nothing for that rank, so it is left out with its
// subtree.
func (ix *partIndex) dump(blockSize uint32) *PartitionDump {
	d := &PartitionDump{BlockSize: blockSize, Events: []RouterEvent{}, Watermarks: []Watermark{}}
	var nextID uint64
	emit := func(r *rankState, t Tier, parent *uint64, b DumpBlock) {
		if n := len(d.Events); n > 0 {
			last := &d.Events[n-1]
			blocks := last.Event.Data.Stored.Blocks
			if last.WorkerID == r.key.Worker && last.Event.DPRank == r.key.Rank && last.StorageTier == t.String() &&
				parent != nil && blocks[len(blocks)-1].BlockHash == *parent {
				last.Event.Data.Stored.Blocks = append(blocks, b)
				return
			}
		}
		nextID++
		d.Events = append(d.Events, RouterEvent{
			WorkerID: r.key.Worker, StorageTier: t.String(),
			Event: KVCacheEvent{EventID: nextID, DPRank: r.key.Rank,
				Data: EventData{Stored: &StoredData{ParentHash: parent, Blocks: []DumpBlock{b}}}},
		})
	}
	for _, k := range ix.rankKeysSorted() {
		r := ix.byRank[k]
		if r.hasSeq {
			d.Watermarks = append(d.Watermarks, Watermark{WorkerID: k.Worker, DPRank: k.Rank, Seq: r.seq})
		}
		// Each covered node once, under its smallest engine hash, which
		// children use as their parent; its other hashes (aliases) follow
		// it as events of their own.
		type member struct {
			id     nodeID
			hashes []uint64
		}
		byNode := map[nodeID][]uint64{}
		for h, id := range r.blocks {
			byNode[id] = append(byNode[id], h)
		}
		children := map[nodeID][]member{}
		for id, hs := range byNode {
			slices.Sort(hs)
			p := ix.nodes.at(id).parent
			children[p] = append(children[p], member{id, hs})
		}
		for _, c := range children {
			slices.SortFunc(c, func(a, b member) int { return cmp.Compare(a.hashes[0], b.hashes[0]) })
		}
		stack := slices.Clone(children[noNode])
		slices.Reverse(stack)
		for len(stack) > 0 {
			m := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			n := ix.nodes.at(m.id)
			var parent *uint64
			if n.parent != noNode {
				ph := byNode[n.parent][0]
				parent = &ph
			}
			for _, h := range m.hashes {
				tiers := ix.hashTiers(r, m.id, h)
				for t := range numTiers {
					if tiers&(1<<t) != 0 {
						emit(r, t, parent, DumpBlock{BlockHash: h, TokensHash: n.local})
					}
				}
			}
			kids := children[m.id]
			for i := len(kids) - 1; i >= 0; i-- {
				stack = append(stack, kids[i])
			}
		}
	}
	return d
}

// LoadStats reports what Load applied.
type LoadStats struct {
	Events, Skipped int
	Blocks          int
}

// Load applies a partition dump (from a peer's GET /dump) to the local
// index and sets each rank's watermark. Events of ranks this node does not
// index are skipped. A block size that differs from the local partition's
// is an error: the dump's block hashes would be meaningless here.
func (x *Indexer) Load(key fsm.PartitionKey, d *PartitionDump) (LoadStats, error) {
	var st LoadStats
	x.mu.RLock()
	p := x.parts[key]
	x.mu.RUnlock()
	if p == nil {
		return st, fmt.Errorf("%w: %s", ErrUnknownPartition, key)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if d.BlockSize != p.blockSize {
		return st, fmt.Errorf("%w: block size %d, partition %s has %d", ErrBadDump, d.BlockSize, key, p.blockSize)
	}
	for i := range d.Events {
		re := &d.Events[i]
		r, ok := p.ix.byRank[RankKey{Worker: re.WorkerID, Rank: re.Event.DPRank}]
		tier, err := ParseTier(re.StorageTier)
		if !ok || err != nil || re.Event.Data.Stored == nil {
			st.Skipped++
			continue
		}
		sd := re.Event.Data.Stored
		ev := Event{Kind: EventStored, Tier: tier, HasParent: sd.ParentHash != nil}
		if sd.ParentHash != nil {
			ev.Parent = *sd.ParentHash
		}
		for _, b := range sd.Blocks {
			ev.Blocks = append(ev.Blocks, StoredBlock{Hash: b.BlockHash, Local: b.TokensHash})
		}
		var as ApplyStats
		if p.ix.applyEvent(r, &ev, &as) != OutcomeOK {
			st.Skipped++
			continue
		}
		st.Events++
		st.Blocks += as.BlocksStored
	}
	for _, w := range d.Watermarks {
		if r, ok := p.ix.byRank[RankKey{Worker: w.WorkerID, Rank: w.DPRank}]; ok {
			r.seq, r.hasSeq = w.Seq, true
		}
	}
	return st, nil
}
