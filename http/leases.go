package http

import (
	"net/http"

	"github.com/kvselect/kvselect/api"
)

// keepAliveOne renews one worker's lease (POST /workers/{id}/keepalive).
func (s *Service) keepAliveOne(w http.ResponseWriter, r *http.Request) error {
	id, err := pathWorkerID(r)
	if err != nil {
		return err
	}
	states, errs, err := s.cfg.Leases.KeepAlive(r.Context(), []uint64{id})
	if err != nil {
		return err
	}
	if errs[0] != nil {
		return errs[0]
	}
	return writeJSON(w, http.StatusOK, leaseView(states[0].WorkerID, states[0].TTL.Milliseconds()))
}

// keepAliveMany renews many leases in one request (POST
// /workers/keepalive): what a process hosting many workers sends once per
// interval. Each id succeeds or fails on its own.
func (s *Service) keepAliveMany(w http.ResponseWriter, r *http.Request) error {
	var in api.KeepAliveRequest
	if err := decodeBody(w, r, &in, false); err != nil {
		return err
	}
	switch {
	case in.WorkerIDs == nil:
		return badRequest("worker_ids", "required")
	case len(in.WorkerIDs) > api.MaxKeepAliveBatch:
		return badRequest("worker_ids", "%d ids; at most %d per request", len(in.WorkerIDs), api.MaxKeepAliveBatch)
	}
	states, errs, err := s.cfg.Leases.KeepAlive(r.Context(), in.WorkerIDs)
	if err != nil {
		return err
	}
	out := api.KeepAliveAnswer{Leases: make([]api.Lease, 0, len(states))}
	for i, st := range states {
		if errs[i] != nil {
			out.Failed = append(out.Failed, api.KeepAliveError{WorkerID: st.WorkerID, Code: string(codeOf(errs[i])), Error: errs[i].Error()})
			continue
		}
		out.Leases = append(out.Leases, leaseView(st.WorkerID, st.TTL.Milliseconds()))
	}
	return writeJSON(w, http.StatusOK, out)
}

func leaseView(id uint64, ttlMs int64) api.Lease {
	return api.Lease{WorkerID: id, LeaseTTLSeconds: uint32(ttlMs / 1000), ExpiresInMs: ttlMs}
}
