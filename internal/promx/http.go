package promx

import (
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Requests counts requests and their latency by route. Route is the
// route's pattern, never the raw path, so the label set stays bounded.
type Requests struct {
	requests *prometheus.CounterVec
	latency  *prometheus.HistogramVec
}

// NewRequests returns the metrics, not registered (Collectors).
func NewRequests() *Requests {
	return &Requests{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kvselect_http_requests_total", Help: "HTTP requests by route, method and status.",
		}, []string{"route", "method", "status"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "kvselect_http_request_duration_seconds", Help: "HTTP request latency by route and status.",
			Buckets: prometheus.ExponentialBuckets(25e-6, 2.5, 14),
		}, []string{"route", "status"}),
	}
}

// Observe counts one answered request.
func (m *Requests) Observe(route, method string, status int, d time.Duration) {
	s := strconv.Itoa(status)
	m.requests.WithLabelValues(route, method, s).Inc()
	m.latency.WithLabelValues(route, s).Observe(d.Seconds())
}

// Collectors returns the metrics for registration.
func (m *Requests) Collectors() []prometheus.Collector {
	return []prometheus.Collector{m.requests, m.latency}
}

// StatusWriter remembers the status a handler answered (200 when it only
// wrote a body).
type StatusWriter struct {
	http.ResponseWriter
	Status int
}

// NewStatusWriter wraps w.
func NewStatusWriter(w http.ResponseWriter) *StatusWriter {
	return &StatusWriter{ResponseWriter: w, Status: http.StatusOK}
}

// WriteHeader records code and passes it on.
func (w *StatusWriter) WriteHeader(code int) {
	w.Status = code
	w.ResponseWriter.WriteHeader(code)
}
