package kvsim

import (
	"math"
	"slices"
	"time"
)

// Figures summarise a timed replay: what a user picks a router by.
type Figures struct {
	Requests int `json:"requests"`
	Served   int `json:"served"`
	Rejected int `json:"rejected"` // refused by the router (kvselect's 503)
	Failed   int `json:"failed"`   // not served for another reason
	// Errors counts failed router calls, lifecycle reports included.
	Errors int `json:"errors"`
	// HitRate is the share of the served prompts' tokens that their
	// engine had cached when it admitted them (prefix-cache hit rate).
	HitRate float64 `json:"hit_rate"`
	// TTFT and E2E are time to first token and end-to-end latency of the
	// served requests, in milliseconds, from arrival.
	TTFTp50 float64 `json:"ttft_p50_ms"`
	TTFTp90 float64 `json:"ttft_p90_ms"`
	TTFTp99 float64 `json:"ttft_p99_ms"`
	E2Ep50  float64 `json:"e2e_p50_ms"`
	E2Ep99  float64 `json:"e2e_p99_ms"`
	// Throughput is served requests (and their output tokens) per second
	// from the first arrival to the last completion.
	Throughput       float64 `json:"throughput_rps"`
	OutputTokensRate float64 `json:"output_tokens_per_s"`
	// OfferedRate is every request (served or not) per second of the
	// arrivals' span: the load the trace offered at this speed.
	OfferedRate float64 `json:"offered_rps"`
	// Imbalance is the time integral of the busiest engine's active
	// requests over that of the mean engine's: 1 is perfectly even, n
	// (the engine count) all on one. Integrals, not a mean of ratios, so
	// that quiet moments with one request in the fleet do not dominate.
	Imbalance float64 `json:"load_imbalance"`
	// RejectRate is Rejected over Requests (the 503 rate).
	RejectRate float64 `json:"reject_rate"`
	// How the router traded hits for load, at routing time, over the
	// served requests: the share sent to an engine holding the longest
	// cached prefix of any, and the prompt tokens cached on the chosen
	// engines and on the best ones.
	LongestPrefixShare float64 `json:"longest_prefix_share"`
	RoutedPrefixRate   float64 `json:"routed_prefix_rate"`
	BestPrefixRate     float64 `json:"best_prefix_rate"`
}

// Figures computes the summary of a replay.
func (r *TimedResult) Figures() Figures {
	f := Figures{Requests: len(r.Requests), Errors: r.Errors}
	var ttft, e2e []time.Duration
	var prompt, hit, out, routed, best int64
	longest := 0
	for _, q := range r.Requests {
		switch q.Outcome {
		case OutcomeServed:
			f.Served++
			routed += int64(q.RoutedPrefixTokens)
			best += int64(q.BestPrefixTokens)
			if q.RoutedPrefixTokens == q.BestPrefixTokens {
				longest++
			}
			prompt += int64(q.InputTokens)
			hit += int64(q.HitTokens)
			out += int64(q.OutputTokens)
			ttft = append(ttft, q.TTFT)
			e2e = append(e2e, q.E2E)
		case OutcomeRejected:
			f.Rejected++
		default:
			f.Failed++
		}
	}
	if prompt > 0 {
		f.HitRate = float64(hit) / float64(prompt)
		f.RoutedPrefixRate = float64(routed) / float64(prompt)
		f.BestPrefixRate = float64(best) / float64(prompt)
	}
	if f.Served > 0 {
		f.LongestPrefixShare = float64(longest) / float64(f.Served)
	}
	slices.Sort(ttft)
	slices.Sort(e2e)
	f.TTFTp50, f.TTFTp90, f.TTFTp99 = ms(Percentile(ttft, 50)), ms(Percentile(ttft, 90)), ms(Percentile(ttft, 99))
	f.E2Ep50, f.E2Ep99 = ms(Percentile(e2e, 50)), ms(Percentile(e2e, 99))
	if span := (r.End - r.firstArrival()).Seconds(); span > 0 {
		f.Throughput = float64(f.Served) / span
		f.OutputTokensRate = float64(out) / span
	}
	f.OfferedRate = r.offeredRate()
	if r.MeanActiveArea > 0 {
		f.Imbalance = r.MaxActiveArea / r.MeanActiveArea
	}
	if f.Requests > 0 {
		f.RejectRate = float64(f.Rejected) / float64(f.Requests)
	}
	return f
}

// offeredRate is the requests per second of the arrivals' span, first to
// last (0 when they all arrive at once).
func (r *TimedResult) offeredRate() float64 {
	if len(r.Requests) == 0 {
		return 0
	}
	last := r.Requests[0].Arrival
	for _, q := range r.Requests {
		last = max(last, q.Arrival)
	}
	if span := (last - r.firstArrival()).Seconds(); span > 0 {
		return float64(len(r.Requests)) / span
	}
	return 0
}

// Goodput is the requests a replay served within a bound on time to first
// token: the share of every request offered, and that share of the
// offered rate. A request the router refused (503) or failed counts
// against it like a late one, so a router cannot buy a good TTFT by
// shedding.
type Goodput struct {
	BoundMs float64 `json:"ttft_bound_ms"`
	Good    int     `json:"good"`
	Share   float64 `json:"share"`
	Rate    float64 `json:"rate_rps"`
}

// Goodput counts the served requests whose TTFT is at most bound.
func (r *TimedResult) Goodput(bound time.Duration) Goodput {
	g := Goodput{BoundMs: ms(bound)}
	for _, q := range r.Requests {
		if q.Outcome == OutcomeServed && q.TTFT <= bound {
			g.Good++
		}
	}
	if len(r.Requests) > 0 {
		g.Share = float64(g.Good) / float64(len(r.Requests))
	}
	g.Rate = g.Share * r.offeredRate()
	return g
}

func (r *TimedResult) firstArrival() time.Duration {
	if len(r.Requests) == 0 {
		return 0
	}
	first := r.Requests[0].Arrival
	for _, q := range r.Requests {
		first = min(first, q.Arrival)
	}
	return first
}

// Percentile returns the p-th percentile (0 < p <= 100) of sorted by the
// nearest-rank method: the smallest value with at least p % of the values
// at or below it. 0 for no values.
func Percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	k := int(math.Ceil(p / 100 * float64(len(sorted))))
	return sorted[min(max(k, 1), len(sorted))-1]
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// TTFTs returns the served requests' times to first token, sorted (for a
// CDF).
func (r *TimedResult) TTFTs() []time.Duration {
	var out []time.Duration
	for _, q := range r.Requests {
		if q.Outcome == OutcomeServed {
			out = append(out, q.TTFT)
		}
	}
	slices.Sort(out)
	return out
}
