package http

import (
	"errors"
	"net/http"

	"github.com/kvselect/kvselect/api"
	"github.com/kvselect/kvselect/zmqsync"
)

// errReplicaSyncOff: a replica-sync route on a node started without
// --replica-sync-port (SPEC §3.6: 409).
var errReplicaSyncOff = errors.New("replica sync is disabled on this node (no --replica-sync-port)")

func (s *Service) replicaSync() (ReplicaSync, error) {
	if s.cfg.ReplicaSync == nil {
		return nil, errReplicaSyncOff
	}
	return s.cfg.ReplicaSync, nil
}

// peerRequest is what both peer writes start with: replica sync on, and
// the body.
func (s *Service) peerRequest(w http.ResponseWriter, r *http.Request) (ReplicaSync, api.ReplicaSyncPeerRequest, error) {
	var in api.ReplicaSyncPeerRequest
	rs, err := s.replicaSync()
	if err != nil {
		return nil, in, err
	}
	return rs, in, decodeBody(w, r, &in, false)
}

func (s *Service) registerPeer(w http.ResponseWriter, r *http.Request) error {
	rs, in, err := s.peerRequest(w, r)
	if err != nil {
		return err
	}
	created, err := rs.Register(in.Endpoint)
	if errors.Is(err, zmqsync.ErrEndpoint) {
		return badRequest("endpoint", "%q is not tcp://host:port", in.Endpoint)
	}
	if err != nil {
		return err
	}
	status := http.StatusOK
	if created {
		status = http.StatusCreated
	}
	return writeJSON(w, status, api.ReplicaSyncPeerAck{Status: api.StatusOK, Endpoint: in.Endpoint})
}

func (s *Service) deregisterPeer(w http.ResponseWriter, r *http.Request) error {
	rs, in, err := s.peerRequest(w, r)
	if err != nil {
		return err
	}
	if err := rs.Deregister(in.Endpoint); err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, api.ReplicaSyncPeerAck{Status: api.StatusOK, Endpoint: in.Endpoint})
}

func (s *Service) replicaSyncPeers(w http.ResponseWriter, _ *http.Request) error {
	rs, err := s.replicaSync()
	if err != nil {
		return err
	}
	ps := rs.Peers()
	out := api.ReplicaSyncPeers{Peers: make([]string, len(ps)), Endpoint: rs.Advertised(), Details: make([]api.ReplicaSyncPeer, len(ps))}
	for i, p := range ps {
		srcs := make([]string, len(p.Sources))
		for j, src := range p.Sources {
			srcs[j] = string(src)
		}
		out.Peers[i] = p.Endpoint
		out.Details[i] = api.ReplicaSyncPeer{Endpoint: p.Endpoint, Dial: p.Dial, NodeID: p.NodeID, Sources: srcs,
			State: string(p.State), LastError: p.LastError, Messages: p.Messages, Events: p.Events, DroppedEvents: p.Dropped}
	}
	return writeJSON(w, http.StatusOK, out)
}
