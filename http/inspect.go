package http

import (
	"compress/gzip"
	"io"
	"net/http"
	"strings"

	"github.com/kvselect/kvselect/api"
)

// ready is 200 only when this node can select: at least one schedulable
// worker in its local catalog. It does not need a leader: selection works
// without quorum. A node removed from the cluster is not ready: its
// catalog is frozen, and it is about to shut down.
//
// /ready is open (probes and load balancers call it without a token), but
// the worker records it lists are the catalog GET /workers guards: a
// caller without a token /workers would take gets the same answer with no
// records (workers: []), so an open route does not hand out the catalog.
func (s *Service) ready(w http.ResponseWriter, r *http.Request) error {
	c := s.cfg.Catalog.Catalog()
	views := s.views(c, c.Workers("", ""))
	n := 0
	for i := range views {
		if *views[i].SchedulableHere {
			n++
		}
	}
	if s.verdict(r, api.AccessSelection) != granted { // GET /workers's class (routes.go)
		views = []api.Worker{}
	}
	st := s.cfg.Cluster.Status()
	body := api.Ready{Ready: n > 0 && !s.removed(), SchedulableWorkers: n, Recovering: s.recovering(), Workers: views,
		Cluster: api.ReadyCluster{NodeID: st.NodeID, State: st.State, Leader: st.Leader.ID,
			AppliedIndex: st.AppliedIndex, CatalogIndex: st.CatalogIndex}}
	status := http.StatusOK
	if !body.Ready {
		status = http.StatusServiceUnavailable
	}
	return writeJSON(w, status, body)
}

// allStale reports whether every rank's listener is stale here: a worker
// this node would not select (SPEC §3.7).
func allStale(ls map[uint32]api.ListenerStatus) bool {
	if len(ls) == 0 {
		return false
	}
	for _, l := range ls {
		if l.State != api.ListenerStale {
			return false
		}
	}
	return true
}

// removed reports whether this node has been removed from the cluster.
func (s *Service) removed() bool {
	select {
	case <-s.cfg.Cluster.Removed():
		return true
	default:
		return false
	}
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

// recovering reports whether the node is still recovering its index.
func (s *Service) recovering() bool { return s.cfg.Recovery != nil && s.cfg.Recovery.Recovering() }

// dump streams the index snapshot: one partition at a time, snapshotted
// under its lock and written after it (indexer.WriteDump), gzip-compressed
// when the client accepts it, so neither this node nor the answer holds
// the whole document. X-Kvselect-Index is the catalog index when the dump
// began: a recovering node waits to have applied it before loading, so the
// dump's partitions and ranks exist there. A node that is itself still
// recovering refuses (503 not_ready), so a partial index never seeds
// another node's.
func (s *Service) dump(w http.ResponseWriter, r *http.Request) error {
	if s.recovering() {
		return errRecovering
	}
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Vary", api.HeaderAcceptEncoding)
	setIndex(w, s.cfg.Cluster.Status().CatalogIndex)
	gz := acceptsGzip(r.Header.Get(api.HeaderAcceptEncoding))
	if gz {
		h.Set(api.HeaderContentEncoding, api.EncodingGzip)
	}
	w.WriteHeader(http.StatusOK)
	if r.Method == http.MethodHead {
		return nil
	}
	var out io.Writer = w
	var zw *gzip.Writer
	if gz {
		// The dump is mostly random 64-bit hashes in decimal: the fastest
		// level already gets most of the gain, and the time matters more
		// (SPEC §12: dump, transfer and load a 1 M-block index in 10 s).
		zw, _ = gzip.NewWriterLevel(w, gzip.BestSpeed)
		out = zw
	}
	st, err := s.cfg.Index.WriteDump(r.Context(), out)
	if err == nil && zw != nil {
		err = zw.Close()
	}
	if err != nil {
		// The status is sent: the body ends short (no gzip trailer, no
		// closing brace), which every loader reports as a broken dump.
		s.log.Warn("dump cut short", "remote", r.RemoteAddr, "partitions", st.Partitions, "err", err)
		return nil
	}
	s.log.Info("dump served", "remote", r.RemoteAddr, "partitions", st.Partitions, "events", st.Events,
		"blocks", st.Blocks, "gzip", gz)
	return nil
}

// acceptsGzip reports whether an Accept-Encoding value allows gzip: named
// (or "*") without q=0.
func acceptsGzip(accept string) bool {
	for part := range strings.SplitSeq(accept, ",") {
		name, params, _ := strings.Cut(part, ";")
		name = strings.TrimSpace(name)
		if !strings.EqualFold(name, api.EncodingGzip) && name != "*" {
			continue
		}
		q := strings.ReplaceAll(strings.TrimSpace(params), " ", "")
		return q != "q=0" && q != "q=0.0" && q != "q=0.00" && q != "q=0.000"
	}
	return false
}
