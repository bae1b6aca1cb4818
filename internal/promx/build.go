package promx

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/kvselect/kvselect/internal/version"
)

// BuildInfo is the kvselect_build_info gauge: 1, with the build in its
// labels.
func BuildInfo() prometheus.Collector {
	v := version.Get()
	commit := v.Commit
	if v.Modified {
		commit += "-modified"
	}
	return prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "kvselect_build_info", Help: "The running build: version, commit and Go version in the labels.",
		ConstLabels: prometheus.Labels{"version": v.Version, "commit": commit, "goversion": v.GoVersion},
	}, func() float64 { return 1 })
}
