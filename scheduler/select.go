package scheduler

import (
	"errors"
	"fmt"
	"hash/fnv"
	"math"
	"time"

	"github.com/kvselect/kvselect/fsm"
	"github.com/kvselect/kvselect/indexer"
)

// SelectRequest asks for a worker rank for a prompt.
type SelectRequest struct {
	Partition fsm.PartitionKey
	Prompt    Prompt
	Override  Override
	// Reserve books the request's load on the chosen rank atomically with
	// the choice, under ReservationID (a UUID is generated when empty).
	Reserve       bool
	ReservationID string
	// SelectionID, without Reserve, makes the node remember the choice
	// for PendingTTL, for a booking by selection id.
	SelectionID string
}

// Selection is the answer of /select and /select_and_reserve.
type Selection struct {
	Partition              fsm.PartitionKey
	WorkerID               uint64
	DPRank                 uint32
	Endpoint               string
	BlockSize              uint32
	Overlap                OverlapSummary
	EffectivePrefillTokens int64
	ReservationID          string
	// Replayed: a select_and_reserve repeated an id already booked here
	// with the same prompt (a caller retrying after a lost answer), and
	// this is the booking's answer, not a new choice (replay.go).
	Replayed bool
	// IgnoredOverrides are the request's Dynamo cost parameters its
	// policy does not take (see Override).
	IgnoredOverrides []string
	// tracked: the partition counts prefill tokens as load, so a
	// booking of this choice records EffectivePrefillTokens.
	tracked bool
}

// OverlapSummary is the chosen worker's match, in tokens: GPU is the best
// device prefix over its ranks, CPU and Disk the best cumulative prefixes
// including host and then disk blocks, DP every rank's device prefix.
type OverlapSummary struct {
	LongestMatched int64
	GPU            int64
	CPU            int64
	Disk           int64
	DP             map[uint32]int64
}

// Select chooses a rank for the prompt (SPEC §6.2) and, with Reserve,
// books it.
func (s *Scheduler) Select(req SelectRequest) (Selection, error) {
	start := time.Now() // the wall clock: s.now may be a replay's virtual one
	sel, err := s.selectRank(&req)
	if err == nil && req.SelectionID != "" && !req.Reserve {
		s.rememberSelection(req.SelectionID, sel, &req.Prompt)
	}
	s.metrics.observeSelect(req.Reserve, err, time.Since(start))
	return sel, err
}

func (s *Scheduler) selectRank(req *SelectRequest) (Selection, error) {
	p := s.partition(req.Partition)
	if p == nil {
		return Selection{}, fmt.Errorf("%w in %s", ErrNotReady, req.Partition)
	}
	rp, err := s.policyFor(s.partitionPolicy(p.key), &req.Override)
	if err != nil {
		return Selection{}, err
	}
	overlaps, err := s.match(p, &req.Prompt)
	if err != nil {
		return Selection{}, err
	}
	// The request's policy decides whether prefill counts in the cost;
	// what a booking records as load is the partition's setting, so no
	// request can hide its load from those after it (or from shedding).
	track, booked := s.trackPrefill(rp), s.trackPrefill(s.partitionPolicy(p.key))

	p.mu.Lock()
	defer p.mu.Unlock()
	if !s.assumeKVReuse(rp) {
		p.unshareSequence(&req.Prompt, req.ReservationID)
	}
	if req.Reserve && req.ReservationID != "" {
		// Before anything else: a retry gets its booking back even when
		// every worker has become busy since.
		if sel, ok, err := s.replay(p, req, overlaps); ok || err != nil {
			return sel, err
		}
	}
	if len(p.ranks) == 0 {
		return Selection{}, fmt.Errorf("%w in %s", ErrNotReady, req.Partition)
	}
	scored := s.score(p, &req.Prompt, overlaps, track)
	fresh := 0
	for i := range scored {
		if !scored[i].rank.stale {
			fresh++
		}
	}
	if fresh == 0 {
		return Selection{}, fmt.Errorf("%w in %s: the KV event listener of every schedulable rank is stale on this node",
			ErrNotReady, req.Partition)
	}
	// Busy is judged over every rank of a worker, stale ones included (a
	// worker is busy only when all its ranks are); stale ranks are then
	// left out of the choice. Whether prefill counts toward busy is the
	// partition's setting, never the request's: a request cannot opt out
	// of load shedding.
	cands := s.shed(p, scored, booked)
	if fresh < len(scored) {
		cands = withoutStale(cands)
	}
	if len(cands) == 0 {
		return Selection{}, fmt.Errorf("%w in %s", ErrOverloaded, req.Partition)
	}
	if req.Reserve {
		if req.ReservationID == "" {
			req.ReservationID = newReservationID()
		}
		if err := s.claimID(req.ReservationID, p, len(req.Prompt.SequenceHashes)); err != nil {
			return Selection{}, err
		}
	}
	in := PolicyInput{ISL: req.Prompt.ISL, Blocks: len(req.Prompt.SequenceHashes), BlockSize: p.blockSize,
		TrackPrefill: track, Rand: p.rng, Turn: &p.turn}
	c := cands[rp.policy.Choose(&in, cands)]
	sel := Selection{
		Partition: p.key, WorkerID: c.rank.key.Worker, DPRank: c.rank.key.Rank,
		Endpoint: c.rank.worker.Endpoint, BlockSize: p.blockSize,
		Overlap:                summarize(c.rank.worker, overlaps, p.blockSize),
		EffectivePrefillTokens: req.Prompt.ISL - c.CachedTokens, tracked: booked,
		IgnoredOverrides: rp.ignored,
	}
	if req.Reserve {
		prefill := int64(0)
		if booked {
			prefill = sel.EffectivePrefillTokens
		}
		res := s.bookLocked(p, req.ReservationID, c.rank, &req.Prompt, prefill)
		sel.ReservationID = req.ReservationID
		res.answer = &sel
	}
	return sel, nil
}

// match resolves the prompt against the partition's block size and looks
// it up in the index. A partition the indexer does not know yet (the
// catalog watcher has not reached it) has no overlaps; nor does one whose
// block size the indexer and this partition momentarily disagree on (the
// watcher is between them), since the hashes would not compare.
func (s *Scheduler) match(p *partition, pr *Prompt) ([]indexer.Overlap, error) {
	p.mu.Lock()
	bs := p.blockSize
	p.mu.Unlock()
	pr.resolve(bs)
	if err := pr.validate(); err != nil {
		return nil, err
	}
	overlaps, indexBS, err := s.idx.Match(p.key, pr.BlockHashes, nil)
	if err != nil && !errors.Is(err, indexer.ErrUnknownPartition) {
		return nil, err
	}
	if indexBS != bs {
		return nil, nil
	}
	return overlaps, nil
}

// score fills a candidate for every schedulable rank: its match and its
// load (the policy computes the cost). Called with p.mu held; the
// returned slice is partition scratch.
func (s *Scheduler) score(p *partition, pr *Prompt, overlaps []indexer.Overlap, track bool) []Candidate {
	if len(p.prefix) < p.slots {
		p.prefix = make([]int32, p.slots)
	}
	prefix := p.prefix[:p.slots]
	clear(prefix)
	p.activePrefixes(pr, prefix)

	now := s.now()
	isl := pr.ISL
	n := int64(len(pr.SequenceHashes))
	p.cands = p.cands[:0]
	oi := 0
	for _, rl := range p.ranks {
		c := Candidate{rank: rl, Worker: rl.key.Worker, Rank: rl.key.Rank}
		for oi < len(overlaps) && compareRankKeys(indexer.RankKey{Worker: overlaps[oi].Worker, Rank: overlaps[oi].Rank}, rl.key) < 0 {
			oi++
		}
		if oi < len(overlaps) && overlaps[oi].Worker == rl.key.Worker && overlaps[oi].Rank == rl.key.Rank {
			o := overlaps[oi]
			c.DeviceBlocks, c.HostExt, c.DiskExt = o.Device, o.HostExt, o.DiskExt
		}
		c.lower = s.cfg.HostCacheHitWeight*float64(c.HostExt) + s.cfg.DiskCacheHitWeight*float64(c.DiskExt)
		c.cachedRaw = int64(math.Round((float64(c.DeviceBlocks) + c.lower) * float64(p.blockSize)))
		c.CachedTokens = min(c.cachedRaw, isl)
		c.PrefillTokens = rl.prefillAt(now)
		c.DecodeBlocks = rl.decodeBlocks()
		c.NewBlocks = float64(n - int64(prefix[rl.slot]))
		c.Requests = rl.requests
		c.TokensPerSecond = p.tokensPerSecond(rl)
		c.potentialPrefill = c.PrefillTokens + isl - c.CachedTokens
		c.potentialDecode = c.DecodeBlocks + c.NewBlocks
		p.cands = append(p.cands, c)
	}
	return p.cands
}

// withoutStale drops, in place, the candidates whose rank is stale here.
func withoutStale(cands []Candidate) []Candidate {
	out := cands[:0]
	for _, c := range cands {
		if !c.rank.stale {
			out = append(out, c)
		}
	}
	return out
}

// cachedTokens turns a credit into tokens, rounded and capped at isl.
func cachedTokens(credit float64, blockSize uint32, isl int64) int64 {
	return min(int64(math.Round(credit*float64(blockSize))), isl)
}

// summarize reports a worker's overlap in tokens over all its ranks.
func summarize(w *fsm.Worker, overlaps []indexer.Overlap, bs uint32) OverlapSummary {
	sum := OverlapSummary{DP: make(map[uint32]int64, w.DataParallelSize)}
	for _, rank := range w.Ranks() {
		sum.DP[rank] = 0
	}
	tok := func(blocks uint32) int64 { return int64(blocks) * int64(bs) }
	for _, o := range overlaps {
		if o.Worker != w.WorkerID || !w.HasRank(o.Rank) {
			continue
		}
		sum.DP[o.Rank] = tok(o.Device)
		sum.GPU = max(sum.GPU, tok(o.Device))
		sum.CPU = max(sum.CPU, tok(o.Device+o.HostExt))
		sum.Disk = max(sum.Disk, tok(o.Total()))
	}
	sum.LongestMatched = sum.Disk
	return sum
}

// unshareSequence applies assume_kv_reuse false (Dynamo's meaning): the
// sequence hashes derived from token ids become values drawn per block, so
// the request shares no active block with any other in the load
// accounting; index matching keeps the real block hashes, and hash-form
// sequence hashes are used as given. Each value mixes the real hash with a
// seed: with a reservation id the seed is a function of it, so a retry of
// the same booking is the same prompt and another prompt under that id is
// not; without one it comes from the partition's generator (p.mu held).
func (p *partition) unshareSequence(pr *Prompt, reservationID string) {
	if !pr.derived {
		return
	}
	var seed uint64
	if reservationID != "" {
		h := fnv.New64a()
		h.Write([]byte(reservationID))
		seed = h.Sum64()
	} else {
		seed = p.rng.Uint64()
	}
	seq := make([]uint64, len(pr.SequenceHashes))
	for i, h := range pr.SequenceHashes {
		seq[i] = splitmix64(seed ^ h)
	}
	pr.SequenceHashes = seq
	pr.derived = false // once: a replayed request keeps these
}

// splitmix64 is SplitMix64's output function: a bijection that scatters
// consecutive inputs.
func splitmix64(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	return x ^ x>>31
}
