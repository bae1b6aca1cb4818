package http

import (
	"errors"
	"net/http"
	"slices"
	"strings"

	"github.com/kvselect/kvselect/api"
	"github.com/kvselect/kvselect/zmqsync"
)

// errReplicaSyncOff: a replica-sync route on a node running without
// replica sync (SPEC §3.6: 409): alone in its cluster without
// --replica-sync-port, or --replica-sync=false.
var errReplicaSyncOff = errors.New("replica sync is off on this node (it starts when a second member joins, or with --replica-sync-port; --replica-sync=false keeps it off)")

// replicaSyncBox holds a ReplicaSync for an atomic pointer.
type replicaSyncBox struct{ rs ReplicaSync }

// SetReplicaSync gives the routes the node's replica sync (nil: off). A
// node that ran alone starts replica sync when a second member joins
// (SPEC §2); its routes answer from then on.
func (s *Service) SetReplicaSync(rs ReplicaSync) {
	s.sync.Store(&replicaSyncBox{rs})
}

func (s *Service) replicaSync() (ReplicaSync, error) {
	if rs := s.sync.Load().rs; rs != nil {
		return rs, nil
	}
	return nil, errReplicaSyncOff
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

// replicaSyncPeers answers the sorted endpoints, a bare array as Dynamo
// does (SPEC §3.6), and [] when replica sync is off: a Dynamo client reads
// it as is. The details are replicaSyncStatus's.
func (s *Service) replicaSyncPeers(w http.ResponseWriter, _ *http.Request) error {
	out := []string{}
	if rs, err := s.replicaSync(); err == nil {
		for _, p := range rs.Peers() {
			out = append(out, p.Endpoint)
		}
		slices.Sort(out)
	}
	return writeJSON(w, http.StatusOK, out)
}

func (s *Service) replicaSyncStatus(w http.ResponseWriter, _ *http.Request) error {
	out := api.ReplicaSyncStatus{Peers: []api.ReplicaSyncPeer{}}
	rs, err := s.replicaSync()
	if err != nil {
		return writeJSON(w, http.StatusOK, out)
	}
	out.Enabled, out.Endpoint = true, rs.Advertised()
	for _, p := range rs.Peers() {
		srcs := make([]string, len(p.Sources))
		for j, src := range p.Sources {
			srcs[j] = string(src)
		}
		out.Peers = append(out.Peers, api.ReplicaSyncPeer{Endpoint: p.Endpoint, Dial: p.Dial, NodeID: p.NodeID, Sources: srcs,
			State: string(p.State), LastError: p.LastError, Messages: p.Messages, Events: p.Events, DroppedEvents: p.Dropped})
	}
	slices.SortFunc(out.Peers, func(a, b api.ReplicaSyncPeer) int { return strings.Compare(a.Endpoint, b.Endpoint) })
	return writeJSON(w, http.StatusOK, out)
}
