package http

import (
	"net/http"

	"github.com/kvselect/kvselect/cluster"
	"github.com/kvselect/kvselect/fsm"
)

func (s *Service) clusterStatus(w http.ResponseWriter, _ *http.Request) error {
	return writeJSON(w, http.StatusOK, s.cfg.Node.Status())
}

type joinInput struct {
	ID          *string `json:"id"`
	RaftAddr    *string `json:"raft_addr"`
	HTTPAddr    *string `json:"http_addr"`
	ReplicaSync *string `json:"replica_sync"`
	// CaughtUp is set by a joining node asking to become a voter.
	CaughtUp bool `json:"caught_up"`
}

func (s *Service) clusterJoin(w http.ResponseWriter, r *http.Request) error {
	var in joinInput
	if err := decodeBody(w, r, &in, false); err != nil {
		return err
	}
	if in.ID == nil || *in.ID == "" {
		return badRequest("id", "required")
	}
	if in.RaftAddr == nil || *in.RaftAddr == "" {
		return badRequest("raft_addr", "required")
	}
	if err := cluster.CheckAdvertise(*in.RaftAddr); err != nil {
		return badRequest("raft_addr", "%v", err)
	}
	req := cluster.JoinRequest{ID: *in.ID, RaftAddr: *in.RaftAddr, HTTPAddr: deref(in.HTTPAddr),
		ReplicaSync: deref(in.ReplicaSync), CaughtUp: in.CaughtUp}
	if req.HTTPAddr != "" {
		if err := checkNodeMeta(req.ID, req.HTTPAddr, req.ReplicaSync); err != nil {
			return err
		}
	}
	if err := s.cfg.Node.Join(r.Context(), req); err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, s.cfg.Node.Status())
}

func (s *Service) clusterRemove(w http.ResponseWriter, r *http.Request) error {
	var in struct {
		ID *string `json:"id"`
	}
	if err := decodeBody(w, r, &in, false); err != nil {
		return err
	}
	if in.ID == nil || *in.ID == "" {
		return badRequest("id", "required")
	}
	if err := s.cfg.Node.Remove(r.Context(), *in.ID); err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, s.cfg.Node.Status())
}

func (s *Service) clusterStepDown(w http.ResponseWriter, r *http.Request) error {
	if err := decodeBody(w, r, &struct{}{}, true); err != nil {
		return err
	}
	if err := s.cfg.Node.StepDown(r.Context()); err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, s.cfg.Node.Status())
}

// clusterMetadata is how a member publishes its own addresses: followers
// send it to the leader when their metadata is missing or stale.
func (s *Service) clusterMetadata(w http.ResponseWriter, r *http.Request) error {
	var in joinInput
	if err := decodeBody(w, r, &in, false); err != nil {
		return err
	}
	if in.ID == nil || *in.ID == "" {
		return badRequest("id", "required")
	}
	if err := checkNodeMeta(*in.ID, deref(in.HTTPAddr), deref(in.ReplicaSync)); err != nil {
		return err
	}
	meta := fsm.NodeMeta{ID: *in.ID, HTTPAddr: deref(in.HTTPAddr), ReplicaSync: deref(in.ReplicaSync)}
	if err := s.cfg.Node.SetMetadata(r.Context(), meta); err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, meta)
}

// checkNodeMeta turns an invalid metadata record into a 400 naming the
// field.
func checkNodeMeta(id, httpAddr, replicaSync string) error {
	if err := fsm.ValidateNode(&fsm.NodeMeta{ID: id, HTTPAddr: httpAddr, ReplicaSync: replicaSync}); err != nil {
		return badRequest("", "%v", err)
	}
	if err := cluster.CheckAdvertise(httpAddr); err != nil {
		return badRequest("http_addr", "%v", err)
	}
	return nil
}

func deref(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}
