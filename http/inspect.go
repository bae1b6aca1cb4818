package http

import (
	"net/http"

	"github.com/kvselect/kvselect/api"
)

// ready is 200 only when this node can select: at least one schedulable
// worker in its local catalog. It does not need a leader: selection works
// without quorum.
func (s *Service) ready(w http.ResponseWriter, _ *http.Request) error {
	c := s.cfg.Catalog.Catalog()
	workers := c.Workers("", "")
	n := 0
	for _, p := range c.Partitions() {
		n += len(p.Schedulable)
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
	model, tenant, err := queryPartition(r)
	if err != nil {
		return err
	}
	parts := s.cfg.Loads.Loads(model, tenant)
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
