package http

import (
	"net/http"

	"github.com/kvselect/kvselect/api"
	"github.com/kvselect/kvselect/cluster"
	"github.com/kvselect/kvselect/fsm"
)

func (s *Service) clusterStatus(w http.ResponseWriter, _ *http.Request) error {
	return writeJSON(w, http.StatusOK, s.cfg.Cluster.Status())
}

// clusterAnswer answers a membership write with the cluster's state. The
// catalog index header lets the forwarding follower (and a client) wait
// for the node metadata the write changed.
func (s *Service) clusterAnswer(w http.ResponseWriter) error {
	st := s.cfg.Cluster.Status()
	setIndex(w, st.CatalogIndex)
	return writeJSON(w, http.StatusOK, st)
}

func (s *Service) clusterJoin(w http.ResponseWriter, r *http.Request) error {
	var in api.JoinRequest
	if err := decodeBody(w, r, &in, false); err != nil {
		return err
	}
	if in.ID == "" {
		return badRequest("id", "required")
	}
	if in.RaftAddr == "" {
		return badRequest("raft_addr", "required")
	}
	if err := cluster.CheckAdvertise(in.RaftAddr); err != nil {
		return badRequest("raft_addr", "%v", err)
	}
	if in.HTTPAddr != "" {
		if err := checkNodeMeta(in.ID, in.HTTPAddr, in.ReplicaSync); err != nil {
			return err
		}
	}
	if err := s.cfg.Cluster.Join(r.Context(), in); err != nil {
		return err
	}
	return s.clusterAnswer(w)
}

func (s *Service) clusterRemove(w http.ResponseWriter, r *http.Request) error {
	var in api.RemoveRequest
	if err := decodeBody(w, r, &in, false); err != nil {
		return err
	}
	if in.ID == "" {
		return badRequest("id", "required")
	}
	if err := s.cfg.Cluster.Remove(r.Context(), in.ID); err != nil {
		return err
	}
	return s.clusterAnswer(w)
}

func (s *Service) clusterStepDown(w http.ResponseWriter, r *http.Request) error {
	if err := decodeBody(w, r, &struct{}{}, true); err != nil {
		return err
	}
	if err := s.cfg.Cluster.StepDown(r.Context()); err != nil {
		return err
	}
	return s.clusterAnswer(w)
}

// clusterMetadata is how a member publishes its own addresses: followers
// send it to the leader when their metadata is missing or stale.
func (s *Service) clusterMetadata(w http.ResponseWriter, r *http.Request) error {
	var in api.NodeMeta
	if err := decodeBody(w, r, &in, false); err != nil {
		return err
	}
	if in.ID == "" {
		return badRequest("id", "required")
	}
	if err := checkNodeMeta(in.ID, in.HTTPAddr, in.ReplicaSync); err != nil {
		return err
	}
	meta := fsm.NodeMeta{ID: in.ID, HTTPAddr: in.HTTPAddr, ReplicaSync: in.ReplicaSync, Incarnation: in.Incarnation,
		CatalogRules: in.CatalogRules}
	if err := s.cfg.Cluster.SetMetadata(r.Context(), meta); err != nil {
		return err
	}
	st := s.cfg.Cluster.Status()
	setIndex(w, st.CatalogIndex)
	return writeJSON(w, http.StatusOK, api.NodeMeta{ID: meta.ID, HTTPAddr: meta.HTTPAddr, ReplicaSync: meta.ReplicaSync,
		Incarnation: meta.Incarnation, CatalogRules: meta.CatalogRules})
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
