package benchutil

import (
	"slices"
	"testing"
	"time"
)

// ReportPercentiles reports the p50 and p99 of per-operation latencies
// measured inside a benchmark loop, as "p50-ns" and "p99-ns".
func ReportPercentiles(b *testing.B, lat []time.Duration) {
	if len(lat) == 0 {
		return
	}
	sorted := slices.Clone(lat)
	slices.Sort(sorted)
	pct := func(p float64) float64 { return float64(sorted[int(p*float64(len(sorted)-1))].Nanoseconds()) }
	b.ReportMetric(pct(0.50), "p50-ns")
	b.ReportMetric(pct(0.99), "p99-ns")
}
