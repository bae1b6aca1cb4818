package scheduler

import (
	"container/list"
	"math"
	"time"

	"github.com/kvselect/kvselect/fsm"
	"github.com/kvselect/kvselect/indexer"
	"github.com/kvselect/kvselect/internal/bisect"
)

// Active load accounting (SPEC §6.3). All of it lives in a partition and is
// guarded by partition.mu.
//
// Prompt blocks are deduplicated per rank: active[seqHash] lists, for each
// rank holding that block, how many live reservations reference it (refs)
// and the XOR of their handles (owners). When refs == 1, owners is the one
// reservation holding the block, which is what decay fractions need: a
// request's blocks that no other request shares weigh its decay fraction.
// Every operation is O(blocks of the request).
//
// Decode load is kept in micro-blocks (unit = one block) so that adding and
// removing fractional weights returns exactly to zero.

const unit = 1_000_000

type rankLoad struct {
	key indexer.RankKey
	// worker is the catalog record the rank belongs to; schedulable says
	// whether it may be selected now. A rank that stops being schedulable
	// keeps its reservations until they end.
	worker      *fsm.Worker
	schedulable bool
	// stale: this node's listener for the rank has been down too long
	// (SetStale); the rank keeps its load but is not selected.
	stale bool
	slot  int // dense index for per-request scratch arrays

	prefill      int64 // active prefill tokens
	decode       int64 // active decode blocks, in micro-blocks
	uniqueBlocks int
	requests     int
	clock        prefillClock // prefill throughput and decay (ttft.go)
}

func (r *rankLoad) decodeBlocks() float64 { return float64(r.decode) / unit }

type activeBlock struct {
	holders []activeHolder
}

type activeHolder struct {
	rank *rankLoad
	slot int32 // rank.slot, kept here to spare a pointer chase
	refs int32
	// unverified counts the refs from reservations whose sequence hashes
	// could not be checked to chain (booked without block hashes).
	unverified int32
	owners     uint64 // XOR of the handles of the reservations holding it
	last       uint64 // handle of the last reservation that added a ref
}

func (b *activeBlock) find(r *rankLoad) int {
	for i := range b.holders {
		if b.holders[i].rank == r {
			return i
		}
	}
	return -1
}

// reservation is one booked request.
type reservation struct {
	id     string
	handle uint64
	rank   *rankLoad
	// origin is the id of the node that booked it when it was mirrored
	// from a peer by replica sync; "" for a booking made here. epoch and
	// counter say which start of the origin published its admission, in
	// which message (0 for one that came as v1); seen is the last of the
	// origin's live sets that listed it (antientropy.go).
	origin               string
	epoch, counter, seen uint64
	// charged is the blocks it counts against the node's bounds
	// (capacity.go): its sequence hashes as booked.
	charged int64
	// answer is what /select_and_reserve answered when it booked this
	// here, for a retry of the same id and prompt (replay.go); nil for
	// other bookings.
	answer *Selection
	// blocks are the request's sequence hashes, without repeats.
	blocks []uint64
	// verified: the sequence hashes were checked to chain the request's
	// block hashes (see activePrefixes).
	verified    bool
	isl         int64
	prefill     int64
	prefillDone bool
	// Output blocks added without a decay fraction weigh one block each
	// (outFull); those covered by the latest fraction weigh frac each.
	outFull, outFrac int64
	fractional       bool
	frac             int64
	admitted         time.Time
	fifo             *list.Element
	// local is when this node booked or mirrored it, on its own clock;
	// work, fadeStart and fadeEnd time its prefill (ttft.go).
	local              time.Time
	work               int64
	expect             time.Duration // work / rate when booked
	fadeStart, fadeEnd time.Time
	prefillElem        *list.Element
	prefillState       int
}

// weight is the decode weight, in micro-blocks, of a block held by this
// reservation alone.
func (r *reservation) weight() int64 {
	if r.fractional {
		return r.frac
	}
	return unit
}

func (p *partition) ownerWeight(owners uint64) int64 {
	if r := p.handles[owners]; r != nil {
		return r.weight()
	}
	return unit
}

// book adds a reservation's load to its rank.
func (p *partition) book(res *reservation, seq []uint64) {
	rl := res.rank
	res.blocks = make([]uint64, 0, len(seq))
	for _, h := range seq {
		ab := p.active[h]
		if ab == nil {
			ab = &activeBlock{}
			p.active[h] = ab
		}
		i := ab.find(rl)
		if i < 0 {
			ab.holders = append(ab.holders, activeHolder{rank: rl, slot: int32(rl.slot)})
			i = len(ab.holders) - 1
		}
		hd := &ab.holders[i]
		if hd.refs > 0 && hd.last == res.handle {
			continue // the same hash twice in one request counts once
		}
		switch hd.refs {
		case 0:
			rl.decode += unit
			rl.uniqueBlocks++
		case 1: // the sole owner's block becomes shared: weight 1 from now
			rl.decode += unit - p.ownerWeight(hd.owners)
		}
		hd.refs++
		if !res.verified {
			hd.unverified++
		}
		hd.owners ^= res.handle
		hd.last = res.handle
		res.blocks = append(res.blocks, h)
	}
	rl.prefill += res.prefill
	p.startPrefill(res)
	rl.requests++
	p.handles[res.handle] = res
	p.reservations[res.id] = res
	p.enqueue(res)
}

// enqueue puts res in fifo in admission order, which the expiry sweep
// relies on to stop at the first live booking. A local booking is the
// newest and goes last at once; a mirrored one keeps its node's (earlier)
// admission time and may belong a little before the tail.
func (p *partition) enqueue(res *reservation) {
	e := p.fifo.Back()
	for e != nil && e.Value.(*reservation).admitted.After(res.admitted) {
		e = e.Prev()
	}
	if e == nil {
		res.fifo = p.fifo.PushFront(res)
		return
	}
	res.fifo = p.fifo.InsertAfter(res, e)
}

// unbook removes a reservation's load; it is the exact inverse of book plus
// the reservation's later output blocks and prefill completion.
func (p *partition) unbook(res *reservation) {
	rl := res.rank
	for _, h := range res.blocks {
		ab := p.active[h]
		i := ab.find(rl)
		hd := &ab.holders[i]
		hd.refs--
		if !res.verified {
			hd.unverified--
		}
		hd.owners ^= res.handle
		switch hd.refs {
		case 0:
			rl.decode -= res.weight()
			rl.uniqueBlocks--
			last := len(ab.holders) - 1
			ab.holders[i] = ab.holders[last]
			ab.holders = ab.holders[:last]
			if last == 0 {
				delete(p.active, h)
			}
		case 1: // shared block left to one owner: its weight now applies
			rl.decode -= unit - p.ownerWeight(hd.owners)
		}
	}
	rl.decode -= res.outFull*unit + res.outFrac*res.frac
	if !res.prefillDone {
		p.stopPrefill(res, p.now(), false)
	}
	rl.requests--
	delete(p.handles, res.handle)
	delete(p.reservations, res.id)
	p.fifo.Remove(res.fifo)
}

// addOutputBlock adds one generated block to the request's decode load.
// With a decay fraction f, the request's unshared blocks and all its output
// blocks weigh f from now on (Dynamo's fractional blocks).
func (p *partition) addOutputBlock(res *reservation, decay *float64) {
	rl := res.rank
	if decay == nil {
		res.outFull++
		rl.decode += unit
		return
	}
	newW := int64(math.Round(*decay * unit))
	oldW := res.weight()
	var single int64
	for _, h := range res.blocks {
		ab := p.active[h]
		if hd := &ab.holders[ab.find(rl)]; hd.refs == 1 {
			single++
		}
	}
	rl.decode += single * (newW - oldW)
	rl.decode -= res.outFull*unit + res.outFrac*res.frac
	res.outFrac += res.outFull + 1
	res.outFull = 0
	res.fractional, res.frac = true, newW
	rl.decode += res.outFrac * newW
}

// completePrefill ends the reservation's prefill load and reports whether
// it was still on (a repeat is a no-op). timed says the end was reported
// as it happened (a prefill_complete, here or mirrored), so its timing is
// a throughput sample; a completion learned late (anti-entropy) is not.
func (p *partition) completePrefill(res *reservation, timed bool) bool {
	if res.prefillDone {
		return false
	}
	res.prefillDone = true
	p.stopPrefill(res, p.now(), timed)
	return true
}

// activePrefixes sets prefix[slot] to the number of leading sequence
// hashes of the prompt already active on each rank.
//
// Sequence hashes chain: each one determines all before it. A rank that
// holds hash i of a chained prompt through a booking whose own hashes were
// checked to chain (verified) therefore holds hashes 0..i-1 too, so along
// the prompt the set of such ranks only shrinks and bisect.Search finds
// every prefix in O(k log n) map lookups. The prompt's hashes are checked
// against its block hashes (one XXH3 per block); a probe that meets a rank
// holding its hash only through unverified bookings (booked without block
// hashes, or with hashes that do not chain) proves nothing about the hashes
// before it, so then, as for an unchained prompt, the exact walk decides.
func (p *partition) activePrefixes(pr *Prompt, prefix []int32) {
	seq := pr.SequenceHashes
	if !chained(seq, pr.BlockHashes) {
		p.walkActivePrefixes(seq, prefix)
		return
	}
	sound := true
	bisect.Search(len(seq), func(d int) int {
		ab := p.active[seq[d-1]]
		if ab == nil {
			return 0
		}
		for _, hd := range ab.holders {
			if hd.unverified == hd.refs {
				sound = false
			}
			prefix[hd.slot] = max(prefix[hd.slot], int32(d))
		}
		return len(ab.holders)
	})
	if !sound {
		clear(prefix)
		p.walkActivePrefixes(seq, prefix)
	}
}

// chained reports whether seq are the sequence hashes of blocks.
func chained(seq, blocks []uint64) bool {
	if len(seq) != len(blocks) || len(seq) == 0 || seq[0] != blocks[0] {
		return len(seq) == 0
	}
	for i := 1; i < len(seq); i++ {
		if seq[i] != indexer.ChainHash(seq[i-1], blocks[i]) {
			return false
		}
	}
	return true
}

// walkActivePrefixes is the reference: it extends each rank's prefix hash
// by hash while it stays contiguous.
func (p *partition) walkActivePrefixes(seq []uint64, prefix []int32) {
	for i, h := range seq {
		ab := p.active[h]
		if ab == nil {
			return
		}
		progressed := false
		for _, hd := range ab.holders {
			if prefix[hd.slot] == int32(i) {
				prefix[hd.slot] = int32(i + 1)
				progressed = true
			}
		}
		if !progressed {
			return
		}
	}
}
