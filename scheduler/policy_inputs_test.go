package scheduler

import (
	"math"
	mrand "math/rand/v2"
	"testing"
)

func Test_PoliciesOnEdgeInputs(t *testing.T) {
	for _, name := range PolicyNames() {
		for _, temp := range []float64{0, 5e-324, 1, 1e308} {
			for _, big := range []float64{0, 1e308} {
				params := map[string]float64{}
				if _, ok := findParam(policyRegistry[name], "router_temperature"); ok {
					params["router_temperature"] = temp
				}
				for _, k := range []string{"prefill_load_scale", "overlap_score_credit", "decode_active_request_weight", "request_tokens", "uncached_weight"} {
					if _, ok := findParam(policyRegistry[name], k); ok {
						params[k] = big
					}
				}
				rp, err := resolvePolicy(PolicySpec{Name: name, Params: params})
				if err != nil {
					t.Fatal(err)
				}
				for n := 1; n <= 3; n++ {
					cands := make([]Candidate, n)
					for i := range cands {
						cands[i] = Candidate{CachedTokens: 16, DeviceBlocks: 1, PrefillTokens: math.MaxInt64 / 4, Requests: i, TokensPerSecond: 1e-300, DecodeBlocks: 1e300}
					}
					var turn uint64
					in := &PolicyInput{ISL: 16, Blocks: 1, BlockSize: 16, TrackPrefill: true, Rand: mrand.New(mrand.NewPCG(1, 1)), Turn: &turn}
					if i := rp.policy.Choose(in, cands); i < 0 || i >= n {
						t.Fatalf("%s: index %d of %d", name, i, n)
					}
				}
			}
		}
	}
	for _, s := range []float64{math.NaN(), math.Inf(1), 1e300, -1, 86399.9999} {
		_ = seconds(s)
	}
	t.Log(seconds(-1))
}
