package scheduler

import (
	"math"
)

// The built-in policies (SPEC §6.4). Each is a Policy built from its
// parameter values; the scheduler has already left out every candidate
// that is not eligible.

func init() {
	registerPolicy(&policyDef{
		name:   "dynamo-default",
		doc:    "Dynamo's cost: prefill blocks after cache credit plus decode blocks plus new blocks (SPEC §6.2); lowest wins",
		params: costParams,
		build:  buildCost,
	})
	registerPolicy(&policyDef{
		name:   "load-aware",
		doc:    "Dynamo's load-aware preset: the cost without cache credit, in-flight requests never sharing active blocks",
		params: costParams,
		preset: map[string]float64{"overlap_score_credit": 0, "assume_kv_reuse": 0, "track_prefill_tokens": 1},
		build:  buildCost,
	})
	registerPolicy(&policyDef{
		name:   "agentic",
		doc:    "Dynamo's agentic preset: cache credit 2, prefill scale 4, active-request weight 64",
		params: costParams,
		preset: map[string]float64{"overlap_score_credit": 2, "prefill_load_scale": 4, "decode_active_request_weight": 64},
		build:  buildCost,
	})
	registerPolicy(&policyDef{
		name: "two-tier",
		doc:  "SGLang's cache-aware router as Dynamo ports it: least loaded when the load spread is large, else the best cached prefix when it covers enough of the prompt, else least loaded",
		params: []Param{
			{Name: "cache_threshold", Default: 0.5, Min: 0, Max: 1, Doc: "follow the best prefix when it covers more than this fraction of the prompt"},
			{Name: "balance_abs_threshold", Default: 32, Min: 0, Doc: "imbalanced when the most and least loaded ranks differ by more than this many requests"},
			{Name: "balance_rel_threshold", Default: 1.1, Min: 1, Doc: "… and the most loaded has more than this times the least"},
		},
		build: func(v paramValues) Policy {
			return twoTier{cacheThreshold: v["cache_threshold"], absThreshold: v["balance_abs_threshold"], relThreshold: v["balance_rel_threshold"]}
		},
	})
	registerPolicy(&policyDef{
		name:  "least-loaded",
		doc:   "the rank with the fewest active requests (ties at random)",
		build: func(paramValues) Policy { return leastLoaded{} },
	})
	registerPolicy(&policyDef{
		name:  "power-of-two",
		doc:   "two ranks drawn at random, the one with fewer active requests",
		build: func(paramValues) Policy { return powerOfTwo{} },
	})
	registerPolicy(&policyDef{
		name:  "round-robin",
		doc:   "the eligible ranks in turn",
		build: func(paramValues) Policy { return roundRobin{} },
	})
	registerPolicy(&policyDef{
		name:  "random",
		doc:   "a rank drawn uniformly at random",
		build: func(paramValues) Policy { return random{} },
	})
	registerPolicy(&policyDef{
		name: "predicted-ttft",
		doc:  "kvselect's own: the earliest predicted time to first token, from the prefill queued on each rank, the request's uncached tokens there and the rank's learned prefill throughput",
		params: []Param{
			{Name: "router_temperature", Default: 0, Min: 0, Doc: "0 picks the earliest; above 0 samples by a softmax over normalised predictions"},
			{Name: "uncached_weight", Default: 0.75, Min: 0,
				Doc: "extra weight of the request's own uncached tokens: the delay its prefill imposes on the requests queued behind it, and the cache it leaves unused"},
			{Name: "request_tokens", Default: 0, Min: 0, Doc: "tokens of prefill time charged per active request on the rank"},
			{Name: "decode_block_tokens", Default: 0, Min: 0, Doc: "tokens of prefill time charged per active decode block and new block on the rank"},
		},
		build: func(v paramValues) Policy {
			return predictedTTFT{temperature: v["router_temperature"], uncached: v["uncached_weight"],
				perRequest: v["request_tokens"], perBlock: v["decode_block_tokens"]}
		},
	})
}

// unsetWeight marks overlap_score_weight as not given.
const unsetWeight = -1

var costParams = []Param{
	{Name: "overlap_score_credit", Default: 1, Min: 0, Doc: "credit per device block already cached"},
	{Name: "prefill_load_scale", Default: 1, Min: 0, Doc: "scale of the prefill term after credit"},
	{Name: "decode_active_request_weight", Default: 0, Min: 0, Doc: "cost per active request on the rank"},
	{Name: "overlap_score_weight", Default: unsetWeight, Min: 0, Doc: "deprecated (Dynamo's older name): sets prefill_load_scale; 0 also sets overlap_score_credit to 0"},
	{Name: "router_temperature", Default: 0, Min: 0, Doc: "0 picks the cheapest; above 0 samples by a softmax over normalised costs"},
}

// costPolicy is Dynamo's cost (SPEC §6.2), lowest wins:
//
//	raw_w    = (P_w + max(isl, cached_w)) / bs   (0 without prefill tracking)
//	credit_w = credit·device_w + host and disk credit
//	cost_w   = scale·max(0, raw_w − credit_w) + D_w + A_w + r·R_w
type costPolicy struct {
	credit, scale, perRequest, temperature float64
}

func buildCost(v paramValues) Policy {
	c := costPolicy{credit: v["overlap_score_credit"], scale: v["prefill_load_scale"],
		perRequest: v["decode_active_request_weight"], temperature: v["router_temperature"]}
	if w := v["overlap_score_weight"]; w != unsetWeight {
		c.scale = w // as Dynamo maps the deprecated weight
		if w == 0 {
			c.credit = 0
		}
	}
	return c
}

func (c costPolicy) Choose(in *PolicyInput, cands []Candidate) int {
	bs := float64(in.BlockSize)
	for i := range cands {
		k := &cands[i]
		cost := k.DecodeBlocks + k.NewBlocks + c.perRequest*float64(k.Requests)
		if in.TrackPrefill {
			// In tokens, then one division: exact whenever the credit is
			// a whole number of tokens, as with Dynamo's defaults.
			credited := float64(k.PrefillTokens+max(in.ISL, k.cachedRaw)) - (c.credit*float64(k.DeviceBlocks)+k.lowerCredit())*bs
			cost += c.scale * max(0, credited/bs)
		}
		k.Cost = cost
	}
	return pickByCost(in, cands, c.temperature)
}

// pickByCost returns the cheapest candidate, ties broken uniformly at
// random, or with temperature T > 0 a sample with probability
// ∝ exp(−(cost − min)/((max − min)·T)).
func pickByCost(in *PolicyInput, cands []Candidate, temp float64) int {
	lo, hi := math.Inf(1), math.Inf(-1)
	for i := range cands {
		if c := cands[i].Cost; !math.IsNaN(c) {
			lo, hi = min(lo, c), max(hi, c)
		}
	}
	scale := (hi - lo) * temp
	if temp == 0 || hi == lo || !(scale > 0) || math.IsInf(scale, 0) {
		// The cheapest, ties uniformly at random (reservoir sampling).
		// Also what a temperature too small or costs too far apart for
		// a softmax in float64 come to.
		pick, ties := 0, 0
		for i := range cands {
			if cands[i].Cost != lo {
				continue
			}
			ties++
			if in.Rand.IntN(ties) == 0 {
				pick = i
			}
		}
		return pick
	}
	weight := func(c float64) float64 {
		if w := math.Exp(-(c - lo) / scale); w > 0 && !math.IsNaN(w) {
			return w
		}
		return 0
	}
	total := 0.0
	for i := range cands {
		total += weight(cands[i].Cost)
	}
	x := in.Rand.Float64() * total
	for i := range cands {
		w := weight(cands[i].Cost)
		if w > 0 && x < w {
			return i
		}
		x -= w
	}
	for i := len(cands) - 1; i >= 0; i-- { // rounding left x at the end
		if weight(cands[i].Cost) > 0 {
			return i
		}
	}
	return 0
}

// leastLoaded costs each rank its active requests.
type leastLoaded struct{}

func (leastLoaded) Choose(in *PolicyInput, cands []Candidate) int {
	for i := range cands {
		cands[i].Cost = float64(cands[i].Requests)
	}
	return pickByCost(in, cands, 0)
}

// powerOfTwo draws two distinct ranks and keeps the less loaded.
type powerOfTwo struct{}

func (powerOfTwo) Choose(in *PolicyInput, cands []Candidate) int {
	for i := range cands {
		cands[i].Cost = float64(cands[i].Requests)
	}
	if len(cands) == 1 {
		return 0
	}
	a := in.Rand.IntN(len(cands))
	b := in.Rand.IntN(len(cands) - 1)
	if b >= a {
		b++
	}
	switch {
	case cands[a].Requests < cands[b].Requests:
		return a
	case cands[b].Requests < cands[a].Requests:
		return b
	case in.Rand.IntN(2) == 0:
		return a
	}
	return b
}

// roundRobin takes the eligible ranks in turn.
type roundRobin struct{}

func (roundRobin) Choose(in *PolicyInput, cands []Candidate) int {
	i := int(*in.Turn % uint64(len(cands)))
	*in.Turn++
	return i
}

// random draws uniformly.
type random struct{}

func (random) Choose(in *PolicyInput, cands []Candidate) int { return in.Rand.IntN(len(cands)) }

// twoTier is SGLang's cache-aware router (as Dynamo ports it), with the
// load of a rank its active requests: when the load is imbalanced (the
// most and least loaded differ by more than absThreshold and the most
// loaded has more than relThreshold times the least) the least loaded
// wins; otherwise the rank with the longest cached prefix, when it covers
// more than cacheThreshold of the prompt; otherwise the least loaded.
type twoTier struct {
	cacheThreshold, absThreshold, relThreshold float64
}

func (t twoTier) Choose(in *PolicyInput, cands []Candidate) int {
	lo, hi := math.Inf(1), math.Inf(-1)
	best := int64(-1)
	for i := range cands {
		l := float64(cands[i].Requests)
		lo, hi = min(lo, l), max(hi, l)
		best = max(best, cands[i].CachedTokens)
	}
	imbalanced := hi-lo > t.absThreshold && hi > t.relThreshold*lo
	if !imbalanced && in.ISL > 0 && float64(best)/float64(in.ISL) > t.cacheThreshold {
		// The best prefix; among equal prefixes the less loaded.
		for i := range cands {
			c := &cands[i]
			c.Cost = float64(c.Requests)
			if c.CachedTokens < best {
				c.Cost = math.Inf(1)
			}
		}
		return pickByCost(in, cands, 0)
	}
	for i := range cands {
		cands[i].Cost = float64(cands[i].Requests)
	}
	return pickByCost(in, cands, 0)
}

// predictedTTFT picks the earliest predicted time to first token (ttft.go):
//
//	ttft_w = (P_w + U_w) / rate_w
//
// with U_w the request's uncached tokens on w and rate_w the rank's learned
// prefill throughput, plus, in the same time units, what placing the
// request there costs the requests after it: its own uncached prefill
// again, weighted (it delays everything queued behind it, and a miss
// leaves the cache that would have served it unused), and optionally a
// charge per active request and per decode block, in tokens of prefill.
type predictedTTFT struct {
	temperature, uncached, perRequest, perBlock float64
}

// ttftTieBreak is the cost, in seconds, of one decode block: far below a
// token's prefill, so it only orders ranks whose predictions are equal
// (an idle fleet), toward the lighter decode load.
const ttftTieBreak = 1e-9

func (t predictedTTFT) Choose(in *PolicyInput, cands []Candidate) int {
	for i := range cands {
		c := &cands[i]
		work := float64(in.ISL - c.CachedTokens)
		if in.TrackPrefill {
			work += float64(c.PrefillTokens)
		}
		own := float64(in.ISL - c.CachedTokens)
		tokens := work + t.uncached*own + t.perRequest*float64(c.Requests) + t.perBlock*(c.DecodeBlocks+c.NewBlocks)
		c.Cost = tokens/c.TokensPerSecond + ttftTieBreak*(c.DecodeBlocks+c.NewBlocks)
	}
	return pickByCost(in, cands, t.temperature)
}
