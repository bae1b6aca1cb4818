package main

import (
	"strings"
	"testing"

	"github.com/kvselect/kvselect/kvsim"
)

// fakeResults gives each strategy a result kvselect meets every target
// against: the best hit rate, TTFT and goodput, E2E equal to the others'.
func fakeResults(ss []strategy) []*strategyResult {
	var out []*strategyResult
	for _, st := range ss {
		r := &strategyResult{Name: st.name, Display: st.display,
			Figures: kvsim.Figures{HitRate: 0.1, TTFTp90: 4000, TTFTp99: 9000, E2Ep99: 20000},
			Goodput: kvsim.Goodput{Share: 0.5}}
		if st.name == strategyKvselect {
			r.Figures = kvsim.Figures{HitRate: 0.3, TTFTp90: 1000, TTFTp99: 2000, E2Ep99: 20000}
			r.Goodput.Share = 0.9
		}
		out = append(out, r)
	}
	return out
}

func resultNamed(rs []*strategyResult, name string) *strategyResult {
	for _, r := range rs {
		if r.Name == name {
			return r
		}
	}
	panic("no " + name)
}

// The checker passes good results and rejects each way of missing SPEC
// §12's routing line; a skipped target never fails the gate, and a gate
// with nothing to check fails.
func Test_RoutingTargets(t *testing.T) {
	for _, def := range []string{"dynamo-default", "predicted-ttft"} {
		ss := routingStrategies(def)
		good := routingTargets(fakeResults(ss), def, true)
		if err := gateTargets(good); err != nil {
			t.Fatalf("default %s: good results fail the gate: %v", def, err)
		}
		skipped := 0
		for _, tg := range good {
			if tg.Skipped {
				skipped++
				if !strings.Contains(tg.Name, "dynamo-default") || def != "dynamo-default" {
					t.Errorf("default %s: %s skipped (%s)", def, tg.Name, tg.Note)
				}
			}
		}
		if want := map[string]int{"dynamo-default": 2, "predicted-ttft": 0}[def]; skipped != want || len(good) != 7 {
			t.Errorf("default %s: %d targets, %d skipped; want 7 and %d", def, len(good), skipped, want)
		}
	}

	ss := routingStrategies("predicted-ttft") // every comparison runs
	tests := []struct {
		name   string
		target string // the target that must be missed
		spoil  func([]*strategyResult)
	}{
		{"hit rate under twice round-robin's", "hit rate vs round-robin", func(rs []*strategyResult) {
			resultNamed(rs, strategyRoundRobin).Figures.HitRate = 0.16
		}},
		{"TTFT p90 over half round-robin's", "TTFT p90 vs round-robin", func(rs []*strategyResult) {
			resultNamed(rs, strategyRoundRobin).Figures.TTFTp90 = 1900
		}},
		{"TTFT p90 over 0.8 of dynamo-default's", "TTFT p90 vs dynamo-default", func(rs []*strategyResult) {
			resultNamed(rs, "dynamo-default").Figures.TTFTp90 = 1200
		}},
		{"TTFT p90 more than 3 % over another's", "TTFT p90 vs every other", func(rs []*strategyResult) {
			resultNamed(rs, strategyGreedyPrefix).Figures.TTFTp90 = 960 // 1000 > 1.03 × 960
		}},
		{"TTFT p99 more than 3 % over another's", "TTFT p99 vs every other", func(rs []*strategyResult) {
			resultNamed(rs, strategyKvselectOff).Figures.TTFTp99 = 1900
		}},
		{"E2E p99 more than 5 % over dynamo-default's", "E2E p99 vs dynamo-default", func(rs []*strategyResult) {
			resultNamed(rs, strategyKvselect).Figures.E2Ep99 = 21001
		}},
		{"goodput more than 3 % under another's", "goodput vs every other", func(rs []*strategyResult) {
			resultNamed(rs, strategyLeastLoaded).Goodput.Share = 0.93
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rs := fakeResults(ss)
			tt.spoil(rs)
			targets := routingTargets(rs, "predicted-ttft", true)
			for _, tg := range targets {
				if missed := !tg.Met && !tg.Skipped; missed != strings.HasPrefix(tg.Name, tt.target) {
					t.Errorf("%s: missed %v (%.3f, want %s)", tg.Name, missed, tg.Value, tg.Target)
				}
			}
			if err := gateTargets(targets); err == nil || !strings.Contains(err.Error(), tt.target) {
				t.Fatalf("gate: %v, want a failure naming %q", err, tt.target)
			}
		})
	}

	// Within the tolerances is met: 3 % over the best other, 5 % over
	// dynamo-default's E2E.
	rs := fakeResults(ss)
	resultNamed(rs, strategyGreedyPrefix).Figures.TTFTp90 = 1000 / 1.03
	resultNamed(rs, strategyKvselect).Figures.E2Ep99 = 21000
	if err := gateTargets(routingTargets(rs, "predicted-ttft", true)); err != nil {
		t.Fatalf("within the tolerances: %v", err)
	}

	// Without the strategies a target compares with, it is skipped, not
	// met; without kvselect there is nothing to check, and the gate fails.
	only := fakeResults([]strategy{ss[0]})
	for _, tg := range routingTargets(only, "predicted-ttft", true) {
		if !tg.Skipped || tg.Note == "" {
			t.Errorf("kvselect alone: %+v", tg)
		}
	}
	if err := gateTargets(routingTargets(fakeResults(ss[1:]), "predicted-ttft", true)); err == nil {
		t.Fatal("the gate passed a run without kvselect")
	}
}
