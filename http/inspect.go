package http

import (
	"net/http"
)

type readyJSON struct {
	Ready              bool         `json:"ready"`
	SchedulableWorkers int          `json:"schedulable_workers"`
	Workers            []workerView `json:"workers"`
	Cluster            readyCluster `json:"cluster"`
}

type readyCluster struct {
	NodeID       string `json:"node_id"`
	State        string `json:"state"`
	Leader       string `json:"leader"`
	AppliedIndex uint64 `json:"applied_index"`
}

// ready is 200 only when this node can select: at least one schedulable
// worker in its local catalog. It does not need a leader: selection works
// without quorum.
func (s *Service) ready(w http.ResponseWriter, _ *http.Request) error {
	workers := s.cfg.Node.Catalog().Workers("", "")
	n := 0
	for _, wk := range workers {
		if wk.Schedulable() {
			n++
		}
	}
	st := s.cfg.Node.Status()
	body := readyJSON{Ready: n > 0, SchedulableWorkers: n, Workers: s.views(workers),
		Cluster: readyCluster{NodeID: st.NodeID, State: st.State, Leader: st.Leader.ID, AppliedIndex: st.AppliedIndex}}
	status := http.StatusOK
	if n == 0 {
		status = http.StatusServiceUnavailable
	}
	return writeJSON(w, status, body)
}

type loadJSON struct {
	WorkerID            uint64  `json:"worker_id"`
	DPRank              uint32  `json:"dp_rank"`
	ActivePrefillTokens int64   `json:"active_prefill_tokens"`
	ActiveDecodeBlocks  float64 `json:"active_decode_blocks"`
	ActiveRequests      int     `json:"active_requests"`
}

type partitionLoadsJSON struct {
	ModelName string     `json:"model_name"`
	TenantID  string     `json:"tenant_id"`
	Loads     []loadJSON `json:"loads"`
}

func (s *Service) loads(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	parts := s.cfg.Scheduler.Loads(q.Get("model_name"), q.Get("tenant_id"))
	out := make([]partitionLoadsJSON, len(parts))
	for i, p := range parts {
		out[i] = partitionLoadsJSON{ModelName: p.Partition.Model, TenantID: p.Partition.Tenant, Loads: make([]loadJSON, len(p.Loads))}
		for j, l := range p.Loads {
			out[i].Loads[j] = loadJSON(l)
		}
	}
	return writeJSON(w, http.StatusOK, out)
}

func (s *Service) dump(w http.ResponseWriter, _ *http.Request) error {
	return writeJSON(w, http.StatusOK, s.cfg.Indexer.Dump())
}
