package slottracker

import (
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/kvselect/kvselect/internal/promx"
	"github.com/kvselect/kvselect/scheduler"
)

// routeUnmatched labels requests to a path the API does not have, so
// scanners cannot grow the label set.
const routeUnmatched = "unmatched"

// newRegistry gathers what GET /metrics serves (SPEC §10, in the node's
// names): requests and latency by route and status, active requests,
// prefill tokens and decode blocks per tracked worker rank (labelled by
// the tracker's model_name and tenant_id), the build, and the Go runtime
// and process.
func (s *Service) newRegistry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		promx.BuildInfo(), scheduler.LoadCollector(s.schedulerLoads))
	reg.MustRegister(s.requests.Collectors()...)
	return reg
}

// schedulerLoads is every tracker's load, as its scheduler reports it.
func (s *Service) schedulerLoads() []scheduler.PartitionLoads {
	var out []scheduler.PartitionLoads
	for _, t := range s.matching("", "") {
		out = append(out, t.sched.Loads(t.key.Model, t.key.Tenant)...)
	}
	return out
}

// methodOther labels the requests whose method their path does not take,
// and every request to a path the API does not have (http.go): the method is the
// client's to choose (any token, "FOO" as well as "GET"), and each new one
// would otherwise make new series.
const methodOther = "other"

// instrument counts a request under its route and method label once it
// is answered.
func (s *Service) instrument(route, method string, w http.ResponseWriter, serve func(http.ResponseWriter)) {
	start := time.Now()
	sw := promx.NewStatusWriter(w)
	serve(sw)
	s.requests.Observe(route, method, sw.Status, time.Since(start))
}

func (s *Service) handleMetrics(w http.ResponseWriter, r *http.Request) error {
	promhttp.HandlerFor(s.registry, promhttp.HandlerOpts{}).ServeHTTP(w, r)
	return nil
}
