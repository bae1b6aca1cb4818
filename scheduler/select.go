package scheduler

import (
	"errors"
	"fmt"
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

// candidate is one schedulable rank scored for a request.
type candidate struct {
	rank                    *rankLoad
	dev, hostExt, diskExt   uint32
	credit                  float64 // weighted cached blocks
	cached                  int64   // weighted cached tokens, capped at isl
	potentialPrefill        int64
	potentialDecode, active float64
	cost                    float64
}

// Select chooses a rank for the prompt (SPEC §6.2) and, with Reserve,
// books it.
func (s *Scheduler) Select(req SelectRequest) (Selection, error) {
	start := s.now()
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
	overlaps, err := s.match(p, &req.Prompt)
	if err != nil {
		return Selection{}, err
	}
	weight, temp := s.cfg.OverlapScoreWeight, s.cfg.Temperature
	if o := req.Override.OverlapScoreWeight; o != nil {
		weight = *o
	}
	if o := req.Override.Temperature; o != nil {
		temp = *o
	}

	p.mu.Lock()
	defer p.mu.Unlock()
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
	scored := s.score(p, &req.Prompt, overlaps, weight)
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
	// left out of the choice.
	cands := s.shed(p, scored)
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
	c := cands[p.choose(cands, temp)]
	sel := Selection{
		Partition: p.key, WorkerID: c.rank.key.Worker, DPRank: c.rank.key.Rank,
		Endpoint: c.rank.worker.Endpoint, BlockSize: p.blockSize,
		Overlap:                summarize(c.rank.worker, overlaps, p.blockSize),
		EffectivePrefillTokens: req.Prompt.ISL - c.cached,
	}
	if req.Reserve {
		prefill := int64(0)
		if s.cfg.TrackPrefillTokens {
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

// score computes the cost of every schedulable rank. Called with p.mu held;
// the returned slice is partition scratch.
func (s *Scheduler) score(p *partition, pr *Prompt, overlaps []indexer.Overlap, weight float64) []candidate {
	if len(p.prefix) < p.slots {
		p.prefix = make([]int32, p.slots)
	}
	prefix := p.prefix[:p.slots]
	clear(prefix)
	p.activePrefixes(pr, prefix)

	bs := float64(p.blockSize)
	isl := pr.ISL
	n := int64(len(pr.SequenceHashes))
	p.cands = p.cands[:0]
	oi := 0
	for _, rl := range p.ranks {
		c := candidate{rank: rl}
		for oi < len(overlaps) && compareRankKeys(indexer.RankKey{Worker: overlaps[oi].Worker, Rank: overlaps[oi].Rank}, rl.key) < 0 {
			oi++
		}
		if oi < len(overlaps) && overlaps[oi].Worker == rl.key.Worker && overlaps[oi].Rank == rl.key.Rank {
			o := overlaps[oi]
			c.dev, c.hostExt, c.diskExt = o.Device, o.HostExt, o.DiskExt
		}
		c.credit = s.credit(c.dev, c.hostExt, c.diskExt)
		c.cached = cachedTokens(c.credit, p.blockSize, isl)
		newTokens := isl - c.cached
		c.potentialPrefill = rl.prefill + newTokens
		newBlocks := float64(n - int64(prefix[rl.slot]))
		c.potentialDecode = rl.decodeBlocks() + newBlocks
		prefillBlocks := 0.0
		if s.cfg.TrackPrefillTokens {
			prefillBlocks = float64(rl.prefill+newTokens) / bs
		}
		c.cost = weight*prefillBlocks + rl.decodeBlocks() + newBlocks
		p.cands = append(p.cands, c)
	}
	return p.cands
}

// withoutStale drops, in place, the candidates whose rank is stale here.
func withoutStale(cands []candidate) []candidate {
	out := cands[:0]
	for _, c := range cands {
		if !c.rank.stale {
			out = append(out, c)
		}
	}
	return out
}

// credit is a rank's cache credit in blocks (SPEC §6.2): device blocks
// count fully, host and disk blocks past the device prefix by their weights.
func (s *Scheduler) credit(dev, hostExt, diskExt uint32) float64 {
	return float64(dev) + s.cfg.HostCacheHitWeight*float64(hostExt) + s.cfg.DiskCacheHitWeight*float64(diskExt)
}

// cachedTokens turns a credit into tokens, rounded and capped at isl.
func cachedTokens(credit float64, blockSize uint32, isl int64) int64 {
	return min(int64(math.Round(credit*float64(blockSize))), isl)
}

// choose returns the index of the chosen candidate: the cheapest, ties
// broken uniformly at random, or with temperature T > 0 a sample with
// probability ∝ exp(−(cost − min)/((max − min)·T)).
func (p *partition) choose(cands []candidate, temp float64) int {
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, c := range cands {
		lo, hi = min(lo, c.cost), max(hi, c.cost)
	}
	if temp == 0 || hi == lo {
		pick, ties := 0, 0
		for i, c := range cands {
			if temp == 0 && c.cost != lo {
				continue
			}
			ties++
			if p.rng.IntN(ties) == 0 { // reservoir sampling: uniform over ties
				pick = i
			}
		}
		return pick
	}
	total := 0.0
	weights := make([]float64, len(cands))
	for i, c := range cands {
		weights[i] = math.Exp(-(c.cost - lo) / ((hi - lo) * temp))
		total += weights[i]
	}
	x := p.rng.Float64() * total
	for i, w := range weights {
		if x < w {
			return i
		}
		x -= w
	}
	return len(cands) - 1
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
