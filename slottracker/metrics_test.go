package slottracker_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// scrape reads GET /metrics into its families.
func (h *harness) scrape() map[string]*dto.MetricFamily {
	h.t.Helper()
	raw := h.expect(http.MethodGet, "/metrics", "", http.StatusOK)
	p := expfmt.NewTextParser(model.LegacyValidation)
	fams, err := p.TextToMetricFamilies(strings.NewReader(string(raw)))
	if err != nil {
		h.t.Fatalf("parse /metrics: %v\n%s", err, raw)
	}
	return fams
}

// value is the sample of family name whose labels include want (a
// histogram's sample count); ok false when there is none.
func value(fams map[string]*dto.MetricFamily, name string, want map[string]string) (float64, bool) {
	for _, m := range fams[name].GetMetric() {
		have := map[string]string{}
		for _, lp := range m.GetLabel() {
			have[lp.GetName()] = lp.GetValue()
		}
		match := true
		for k, v := range want {
			match = match && have[k] == v
		}
		if !match {
			continue
		}
		switch {
		case m.GetCounter() != nil:
			return m.GetCounter().GetValue(), true
		case m.GetGauge() != nil:
			return m.GetGauge().GetValue(), true
		case m.GetHistogram() != nil:
			return float64(m.GetHistogram().GetSampleCount()), true
		}
	}
	return 0, false
}

// Test_Metrics: GET /metrics serves, in the node's metric names, the
// requests by route and status (unknown paths under one label), their
// latency, the active load of every tracked rank by tracker, and the
// build.
func Test_Metrics(t *testing.T) {
	h := mustStart(t)
	h.register("llama", "default", 7, 16, 0, 2)
	h.register("qwen", "t1", 7, 16, 0, 1) // the same worker id in another tracker
	h.add(`{"model_name": "llama", "request_id": "r1", "worker_id": 7, "dp_rank": 0, "sequence_hashes": [1, 2, 3], "new_isl_tokens": 48}`)
	h.add(`{"model_name": "qwen", "tenant_id": "t1", "request_id": "r1", "worker_id": 7, "dp_rank": 0, "sequence_hashes": [9], "new_isl_tokens": 16}`)
	h.post("/add", `{"model_name": "llama", "request_id": "r1", "worker_id": 7, "dp_rank": 1, "sequence_hashes": []}`, http.StatusConflict)
	h.expect(http.MethodGet, "/no-such-route/12345", "", http.StatusNotFound)
	h.expect(http.MethodDelete, "/loads", "", http.StatusMethodNotAllowed)

	rank := func(model, tenant, r string) map[string]string {
		return map[string]string{"model_name": model, "tenant_id": tenant, "worker_id": "7", "dp_rank": r}
	}
	type sample struct {
		name   string
		labels map[string]string
		want   float64
	}
	check := func(when string, fams map[string]*dto.MetricFamily, samples []sample) {
		t.Helper()
		for _, s := range samples {
			got, ok := value(fams, s.name, s.labels)
			if !ok || got != s.want {
				t.Errorf("%s: %s%v = %v (present %v), want %v", when, s.name, s.labels, got, ok, s.want)
			}
		}
	}
	check("after two adds", h.scrape(), []sample{
		{"kvselect_http_requests_total", map[string]string{"route": "/register", "method": "POST", "status": "201"}, 2},
		{"kvselect_http_requests_total", map[string]string{"route": "/add", "method": "POST", "status": "201"}, 2},
		{"kvselect_http_requests_total", map[string]string{"route": "/add", "method": "POST", "status": "409"}, 1},
		{"kvselect_http_requests_total", map[string]string{"route": "unmatched", "method": "other", "status": "404"}, 1},
		{"kvselect_http_requests_total", map[string]string{"route": "/loads", "method": "other", "status": "405"}, 1},
		{"kvselect_http_request_duration_seconds", map[string]string{"route": "/add", "status": "201"}, 2},
		{"kvselect_active_requests", rank("llama", "default", "0"), 1},
		{"kvselect_active_prefill_tokens", rank("llama", "default", "0"), 48},
		{"kvselect_active_decode_blocks", rank("llama", "default", "0"), 3},
		{"kvselect_active_requests", rank("llama", "default", "1"), 0},
		{"kvselect_active_requests", rank("qwen", "t1", "0"), 1},
		{"kvselect_active_prefill_tokens", rank("qwen", "t1", "0"), 16},
		{"kvselect_active_decode_blocks", rank("qwen", "t1", "0"), 1},
		{"kvselect_build_info", nil, 1},
	})

	h.ok("/prefill_complete", `{"model_name": "llama", "request_id": "r1"}`, http.StatusOK)
	h.ok("/free", `{"model_name": "qwen", "tenant_id": "t1", "request_id": "r1"}`, http.StatusOK)
	fams := h.scrape()
	check("after prefill_complete and free", fams, []sample{
		{"kvselect_active_requests", rank("llama", "default", "0"), 1},
		{"kvselect_active_prefill_tokens", rank("llama", "default", "0"), 0},
		{"kvselect_active_decode_blocks", rank("llama", "default", "0"), 3},
		{"kvselect_active_requests", rank("qwen", "t1", "0"), 0},
		{"kvselect_active_decode_blocks", rank("qwen", "t1", "0"), 0},
	})
	for _, m := range fams["kvselect_http_requests_total"].GetMetric() {
		for _, lp := range m.GetLabel() {
			if lp.GetName() == "route" && strings.Contains(lp.GetValue(), "12345") {
				t.Errorf("an unknown path became a route label: %v", m.GetLabel())
			}
		}
	}

	// A tracker dropped with its last worker leaves no series behind.
	h.ok("/unregister", `{"model_name": "qwen", "tenant_id": "t1", "worker_id": 7}`, http.StatusOK)
	if _, ok := value(h.scrape(), "kvselect_active_requests", rank("qwen", "t1", "0")); ok {
		t.Error("the dropped qwen tracker's rank is still exported")
	}
}

// Test_MetricsMadeUpMethods: the method label is the client's to choose
// (any token is a method), so a scanner's made-up methods, on unknown
// paths and on known ones that do not take them, must not make a series
// each: they are all "other". 500 of them used to make 1000 series.
func Test_MetricsMadeUpMethods(t *testing.T) {
	h := mustStart(t)
	const n = 500
	for i := range n {
		m := fmt.Sprintf("X%d", i)
		h.expect(m, "/no-such-route", "", http.StatusNotFound)
		h.expect(m, "/loads", "", http.StatusMethodNotAllowed)
	}
	h.expect(http.MethodGet, "/loads", "", http.StatusOK)
	methods := map[string]bool{}
	fam := h.scrape()["kvselect_http_requests_total"]
	for _, m := range fam.GetMetric() {
		for _, lp := range m.GetLabel() {
			if lp.GetName() == "method" {
				methods[lp.GetValue()] = true
			}
		}
	}
	if len(methods) > 4 || !methods["other"] || !methods[http.MethodGet] {
		t.Fatalf("after %d made-up methods the requests have %d method labels, want GET, other and no more than a few",
			n, len(methods))
	}
	if got, _ := value(h.scrape(), "kvselect_http_requests_total", map[string]string{"route": "/loads", "method": "other", "status": "405"}); got != n {
		t.Fatalf("/loads' 405s under method other = %v, want %d", got, n)
	}
}
