package http

import (
	"net/http"

	"github.com/kvselect/kvselect/api"
)

// ready is 200 only when this node can select: at least one schedulable
// worker in its local catalog. It does not need a leader: selection works
// without quorum.
func (s *Service) ready(w http.ResponseWriter, _ *http.Request) error {
	workers := s.cfg.Catalog.Catalog().Workers("", "")
	n := 0
	for _, wk := range workers {
		if wk.Schedulable() {
			n++
		}
	}
	st := s.cfg.Cluster.Status()
	body := api.Ready{Ready: n > 0, SchedulableWorkers: n, Workers: s.views(workers),
		Cluster: api.ReadyCluster{NodeID: st.NodeID, State: st.State, Leader: st.Leader.ID,
			AppliedIndex: st.AppliedIndex, CatalogIndex: st.CatalogIndex}}
	status := http.StatusOK
	if n == 0 {
		status = http.StatusServiceUnavailable
	}
	return writeJSON(w, status, body)
}

func (s *Service) loads(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	parts := s.cfg.Loads.Loads(q.Get(api.QueryModelName), q.Get(api.QueryTenantID))
	out := make([]api.PartitionLoads, len(parts))
	for i, p := range parts {
		out[i] = api.PartitionLoads{ModelName: p.Partition.Model, TenantID: p.Partition.Tenant, Loads: make([]api.RankLoad, len(p.Loads))}
		for j, l := range p.Loads {
			out[i].Loads[j] = api.RankLoad(l)
		}
	}
	return writeJSON(w, http.StatusOK, out)
}

func (s *Service) dump(w http.ResponseWriter, _ *http.Request) error {
	return writeJSON(w, http.StatusOK, s.cfg.Index.Dump())
}
