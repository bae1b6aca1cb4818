package main

import (
	"errors"
	"fmt"
	"io"
	"strings"
)

// routingTarget is one of SPEC §12's routing targets, checked on a run.
// A skipped target (a strategy it compares with did not run, or the
// comparison is kvselect with itself) is neither met nor missed; Note
// says why.
type routingTarget struct {
	Name    string  `json:"name"`
	Value   float64 `json:"value"`
	Target  string  `json:"target"`
	Met     bool    `json:"met"`
	Skipped bool    `json:"skipped,omitempty"`
	Note    string  `json:"note,omitempty"`
}

// Tolerances of SPEC §12's routing line.
const (
	// withinOthers: kvselect's TTFT p90 and p99 (and, in the sweep, its
	// goodput) within 3 % of every other strategy's, or better.
	withinOthers = 0.03
	// withinE2E: kvselect's E2E p99 within 5 % of dynamo-default's.
	withinE2E = 0.05
)

// routingTargets checks SPEC §12's routing line for kvselect against the
// strategies that ran, for a build whose shipped default policy is
// defaultPolicy: hit rate ≥ 2× round-robin's; TTFT p90 ≤ 0.5×
// round-robin's and ≤ 0.8× dynamo-default's; TTFT p90 and p99 within 3 %
// of every other strategy's or better; E2E p99 within 5 % of
// dynamo-default's. The comparisons with dynamo-default are skipped when
// it is the default (kvselect runs it). withGoodput adds the sweep's
// goodput target: within 3 % of every other strategy's or better. No
// kvselect run, no targets.
func routingTargets(results []*strategyResult, defaultPolicy string, withGoodput bool) []routingTarget {
	by := map[string]*strategyResult{}
	for _, r := range results {
		by[r.Name] = r
	}
	kvr, ok := by[strategyKvselect]
	if !ok {
		return nil
	}
	kv := kvr.Figures
	var out []routingTarget
	skip := func(name, note string) {
		out = append(out, routingTarget{Name: name, Skipped: true, Note: note})
	}

	const hitRR, p90RR = "hit rate vs round-robin", "TTFT p90 vs round-robin (ms)"
	if rr, ok := by[strategyRoundRobin]; ok {
		out = append(out,
			routingTarget{Name: hitRR, Value: kv.HitRate, Target: fmt.Sprintf(">= 2 x %.3f", rr.Figures.HitRate), Met: kv.HitRate >= 2*rr.Figures.HitRate},
			routingTarget{Name: p90RR, Value: kv.TTFTp90, Target: fmt.Sprintf("<= 0.5 x %.0f", rr.Figures.TTFTp90), Met: kv.TTFTp90 <= 0.5*rr.Figures.TTFTp90})
	} else {
		skip(hitRR, "round-robin did not run")
		skip(p90RR, "round-robin did not run")
	}

	const p90DD, e2eDD = "TTFT p90 vs dynamo-default (ms)", "E2E p99 vs dynamo-default (ms)"
	switch dd, ok := by[policyDynamoDefault]; {
	case defaultPolicy == policyDynamoDefault:
		note := "the shipped default is dynamo-default: kvselect runs it, there is nothing else to compare"
		skip(p90DD, note)
		skip(e2eDD, note)
	case !ok:
		skip(p90DD, "dynamo-default did not run")
		skip(e2eDD, "dynamo-default did not run")
	default:
		out = append(out,
			routingTarget{Name: p90DD, Value: kv.TTFTp90, Target: fmt.Sprintf("<= 0.8 x %.0f", dd.Figures.TTFTp90), Met: kv.TTFTp90 <= 0.8*dd.Figures.TTFTp90},
			routingTarget{Name: e2eDD, Value: kv.E2Ep99, Target: fmt.Sprintf("<= %.2f x %.0f", 1+withinE2E, dd.Figures.E2Ep99),
				Met: kv.E2Ep99 <= (1+withinE2E)*dd.Figures.E2Ep99})
	}

	// Lower is better: kvselect's figure within 3 % above the best other.
	lowest := func(name string, fig func(*strategyResult) float64) {
		best := (*strategyResult)(nil)
		for _, r := range results {
			if r.Name != strategyKvselect && (best == nil || fig(r) < fig(best)) {
				best = r
			}
		}
		if best == nil {
			skip(name, "no other strategy ran")
			return
		}
		v, b := fig(kvr), fig(best)
		out = append(out, routingTarget{Name: name, Value: v, Target: fmt.Sprintf("<= %.2f x %.0f (%s)", 1+withinOthers, b, best.Display),
			Met: v <= (1+withinOthers)*b})
	}
	lowest("TTFT p90 vs every other strategy (ms)", func(r *strategyResult) float64 { return r.Figures.TTFTp90 })
	lowest("TTFT p99 vs every other strategy (ms)", func(r *strategyResult) float64 { return r.Figures.TTFTp99 })

	if withGoodput {
		const name = "goodput vs every other strategy (share)"
		best := (*strategyResult)(nil)
		for _, r := range results {
			if r.Name != strategyKvselect && (best == nil || r.Goodput.Share > best.Goodput.Share) {
				best = r
			}
		}
		if best == nil {
			skip(name, "no other strategy ran")
		} else {
			v, b := kvr.Goodput.Share, best.Goodput.Share
			out = append(out, routingTarget{Name: name, Value: v, Target: fmt.Sprintf(">= %.2f x %.3f (%s)", 1-withinOthers, b, best.Display),
				Met: v >= (1-withinOthers)*b})
		}
	}
	return out
}

// gateTargets fails when a target was missed, or when there was nothing
// to check: a gate that cannot fail is no gate.
func gateTargets(targets []routingTarget) error {
	if len(targets) == 0 {
		return errors.New("-gate: no target checked (kvselect did not run)")
	}
	var missed []string
	for _, t := range targets {
		if !t.Met && !t.Skipped {
			missed = append(missed, fmt.Sprintf("%s: %.3f, want %s", t.Name, t.Value, t.Target))
		}
	}
	if len(missed) > 0 {
		return fmt.Errorf("-gate: %d of SPEC §12's routing targets missed:\n  %s", len(missed), strings.Join(missed, "\n  "))
	}
	return nil
}

func printTargets(w io.Writer, targets []routingTarget) {
	for _, t := range targets {
		switch {
		case t.Skipped:
			fmt.Fprintf(w, "target %-42s skipped: %s\n", t.Name, t.Note)
		case t.Met:
			fmt.Fprintf(w, "target %-42s %10.3f %s: met\n", t.Name, t.Value, t.Target)
		default:
			fmt.Fprintf(w, "target %-42s %10.3f %s: MISSED\n", t.Name, t.Value, t.Target)
		}
	}
}
