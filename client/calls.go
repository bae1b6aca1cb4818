package client

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"

	"github.com/kvselect/kvselect/api"
)

// send marshals body (when not nil) into the call and runs it.
func (c *Client) send(ctx context.Context, cl call, body, out any) error {
	if body != nil {
		raw, err := json.Marshal(body)
		if err != nil {
			return fmt.Errorf("client: encoding the %s %s body: %w", cl.method, cl.path, err)
		}
		cl.body = raw
	}
	return c.do(ctx, cl, out)
}

// decoded sends the call and decodes its answer into a new T, which it
// returns (with the call's error, if any) for the typed methods below.
func decoded[T any](ctx context.Context, c *Client, cl call, body any) (*T, error) {
	var out T
	return &out, c.send(ctx, cl, body, &out)
}

// acceptOKOr503 takes a 503 as an answer: the readiness routes say "not
// ready" with it, which is no error.
func acceptOKOr503(status int) bool {
	return status == http.StatusOK || status == http.StatusServiceUnavailable
}

// partitionQuery holds the model_name and tenant_id filters that are set.
func partitionQuery(model, tenant string) url.Values {
	q := url.Values{}
	if model != "" {
		q.Set(api.QueryModelName, model)
	}
	if tenant != "" {
		q.Set(api.QueryTenantID, tenant)
	}
	return q
}

func withQuery(path string, q url.Values) string {
	if len(q) == 0 {
		return path
	}
	return path + "?" + q.Encode()
}

// Health is GET /health.
func (c *Client) Health(ctx context.Context) (*api.Health, error) {
	return decoded[api.Health](ctx, c, call{method: http.MethodGet, path: api.PathHealth, kind: read}, nil)
}

// Ready is GET /ready. A node that is not ready answers 503 with the same
// body; that is not an error: the result's Ready is false.
func (c *Client) Ready(ctx context.Context) (*api.Ready, error) {
	return decoded[api.Ready](ctx, c, call{method: http.MethodGet, path: api.PathReady, kind: read, accept: acceptOKOr503}, nil)
}

// Readyz is GET /readyz: is this node a member caught up with the
// leader's commit (what an orchestrator's readiness probe asks)? A 503 is
// not an error: the result's Ready is false and Reason says why.
func (c *Client) Readyz(ctx context.Context) (*api.Readyz, error) {
	return decoded[api.Readyz](ctx, c, call{method: http.MethodGet, path: api.PathReadyz, kind: read, accept: acceptOKOr503}, nil)
}

// SelectionReadyz is GET /readyz?for=selection: can this node select
// (what the Kubernetes manifests' readiness probe asks)? Ready once the
// node has, since it started, caught up with a leader's commit index and
// recovered its KV index; it stays ready without a leader or a quorum. A
// 503 is not an error: the result's Ready is false and Reason says why.
func (c *Client) SelectionReadyz(ctx context.Context) (*api.Readyz, error) {
	path := withQuery(api.PathReadyz, url.Values{api.QueryFor: {api.ReadyzForSelection}})
	return decoded[api.Readyz](ctx, c, call{method: http.MethodGet, path: path, kind: read, accept: acceptOKOr503}, nil)
}

// Metrics is GET /metrics, in Prometheus' text format.
func (c *Client) Metrics(ctx context.Context) (string, error) {
	var info ResponseInfo
	err := c.do(WithResponseInfo(ctx, &info), call{method: http.MethodGet, path: api.PathMetrics, kind: read}, nil)
	return string(info.Body), err
}

// OpenAPI is GET /openapi.json, the API's description.
func (c *Client) OpenAPI(ctx context.Context) (json.RawMessage, error) {
	var out json.RawMessage
	return out, c.send(ctx, call{method: http.MethodGet, path: api.PathOpenAPI, kind: read}, nil, &out)
}

// RegisterWorker registers a worker, or replaces the record of its id
// (POST /workers).
func (c *Client) RegisterWorker(ctx context.Context, spec api.WorkerSpec) (*api.WorkerWritten, error) {
	return c.UpsertWorker(ctx, spec.Body())
}

// UpsertWorker is POST /workers with the body as given; WorkerID is
// required.
func (c *Client) UpsertWorker(ctx context.Context, body api.WorkerFields) (*api.WorkerWritten, error) {
	return decoded[api.WorkerWritten](ctx, c, call{method: http.MethodPost, path: api.PathWorkers, kind: write}, body)
}

// PatchWorker changes the given fields of a worker (PATCH /workers/{id}).
func (c *Client) PatchWorker(ctx context.Context, id uint64, patch api.WorkerFields) (*api.WorkerWritten, error) {
	return decoded[api.WorkerWritten](ctx, c, call{method: http.MethodPatch, path: api.WorkerPath(id), kind: write}, patch)
}

// DeleteWorker removes a worker and returns its last record (DELETE
// /workers/{id}).
func (c *Client) DeleteWorker(ctx context.Context, id uint64) (*api.WorkerWritten, error) {
	return decoded[api.WorkerWritten](ctx, c, call{method: http.MethodDelete, path: api.WorkerPath(id), kind: write}, nil)
}

// KeepAlive renews one worker's lease (POST /workers/{id}/keepalive;
// SPEC §3.7). An *Error with CodeNotFound means the worker is gone (its
// lease may have lapsed): register it again. Renewals are idempotent, so
// the client resends one whose answer was lost.
func (c *Client) KeepAlive(ctx context.Context, id uint64) (*api.Lease, error) {
	return decoded[api.Lease](ctx, c, call{method: http.MethodPost, path: api.KeepAlivePath(id), kind: write}, nil)
}

// KeepAliveMany renews many workers' leases in one request (POST
// /workers/keepalive): the answer lists the leases renewed and, with
// their codes, the ids that were not.
func (c *Client) KeepAliveMany(ctx context.Context, ids []uint64) (*api.KeepAliveAnswer, error) {
	var out api.KeepAliveAnswer
	return &out, c.send(ctx, call{method: http.MethodPost, path: api.PathKeepAlive, kind: write},
		api.KeepAliveRequest{WorkerIDs: ids}, &out)
}

// WorkersOptions filters and qualifies a catalog read.
type WorkersOptions struct {
	ModelName, TenantID string
	// Linearizable reads on the leader after it confirms its leadership,
	// instead of the home node's catalog (which still reflects this
	// client's own writes).
	Linearizable bool
}

// Workers lists the catalog (GET /workers).
func (c *Client) Workers(ctx context.Context, opts WorkersOptions) ([]api.Worker, error) {
	q := partitionQuery(opts.ModelName, opts.TenantID)
	var out []api.Worker
	return out, c.send(ctx, catalogRead(api.PathWorkers, q, opts.Linearizable), nil, &out)
}

// Worker reads one catalog record (GET /workers/{id}).
func (c *Client) Worker(ctx context.Context, id uint64, linearizable bool) (*api.Worker, error) {
	return decoded[api.Worker](ctx, c, catalogRead(api.WorkerPath(id), url.Values{}, linearizable), nil)
}

func catalogRead(path string, q url.Values, linearizable bool) call {
	cl := call{method: http.MethodGet, kind: read, session: true}
	if linearizable {
		q.Set(api.QueryConsistency, api.ConsistencyLinearizable)
		cl.kind, cl.session = leaderRead, false
	}
	cl.path = withQuery(path, q)
	return cl
}

// Select chooses a worker rank for a prompt and books nothing (POST
// /select). With a SelectionID the node remembers the choice for
// ReserveSelection.
func (c *Client) Select(ctx context.Context, req api.SelectRequest) (*api.Selection, error) {
	if req.ReservationID != "" {
		return nil, fmt.Errorf("client: Select books nothing; use SelectAndReserve to book under reservation_id %q", req.ReservationID)
	}
	return decoded[api.Selection](ctx, c, call{method: http.MethodPost, path: api.PathSelect, kind: read, session: true}, req)
}

// SelectAndReserve chooses and books atomically on the home node (POST
// /select_and_reserve); without a ReservationID the node generates one.
func (c *Client) SelectAndReserve(ctx context.Context, req api.SelectRequest) (*api.Selection, error) {
	return decoded[api.Selection](ctx, c, call{method: http.MethodPost, path: api.PathSelectAndReserve, kind: booking, session: true}, req)
}

// Reserve books a request on a worker rank chosen elsewhere (POST
// /reservations): Ray's select-then-reserve.
func (c *Client) Reserve(ctx context.Context, req api.ReserveRequest) (*api.Reservation, error) {
	return decoded[api.Reservation](ctx, c, call{method: http.MethodPost, path: api.PathReservations, kind: booking, session: true}, req)
}

// ReserveSelection books exactly the choice a Select with selectionID
// made on the home node, under reservationID.
func (c *Client) ReserveSelection(ctx context.Context, reservationID, selectionID string) (*api.Reservation, error) {
	return c.Reserve(ctx, api.ReserveRequest{ReservationID: api.ID(reservationID), SelectionID: api.ID(selectionID)})
}

// PrefillComplete clears a booking's prefill load (POST
// /reservations/{id}/prefill_complete); repeating it is a no-op.
func (c *Client) PrefillComplete(ctx context.Context, id string) error {
	if err := checkPathID(id); err != nil {
		return err
	}
	return c.send(ctx, call{method: http.MethodPost, path: api.PrefillCompletePath(id), kind: booking}, nil, nil)
}

// OutputBlock adds one output block to a booking's decode load (POST
// /reservations/{id}/output_block); decay, when not nil, is in [0, 1].
func (c *Client) OutputBlock(ctx context.Context, id string, decay *float64) error {
	if err := checkPathID(id); err != nil {
		return err
	}
	var body any
	if decay != nil {
		body = api.OutputBlockRequest{DecayFraction: decay}
	}
	return c.send(ctx, call{method: http.MethodPost, path: api.OutputBlockPath(id), kind: booking}, body, nil)
}

// Free ends a booking (DELETE /reservations/{id}).
func (c *Client) Free(ctx context.Context, id string) error {
	if err := checkPathID(id); err != nil {
		return err
	}
	return c.send(ctx, call{method: http.MethodDelete, path: api.ReservationPath(id), kind: booking}, nil, nil)
}

// Reservations lists the home node's bookings, one page at a time (GET
// /reservations); pass the page's NextCursor as q.Cursor for the next.
func (c *Client) Reservations(ctx context.Context, q api.ReservationsQuery) (*api.ReservationPage, error) {
	v := partitionQuery(q.ModelName, q.TenantID)
	if q.Cursor != "" {
		v.Set(api.QueryCursor, q.Cursor)
	}
	if q.WorkerID != nil {
		v.Set(api.QueryWorkerID, strconv.FormatUint(*q.WorkerID, 10))
	}
	if q.Limit > 0 {
		v.Set(api.QueryLimit, strconv.Itoa(q.Limit))
	}
	return decoded[api.ReservationPage](ctx, c, call{method: http.MethodGet, path: withQuery(api.PathReservations, v), kind: read}, nil)
}

// Reservation shows one booking of the home node (GET
// /reservations/{id}).
func (c *Client) Reservation(ctx context.Context, id string) (*api.ReservationInfo, error) {
	if err := checkPathID(id); err != nil {
		return nil, err
	}
	return decoded[api.ReservationInfo](ctx, c, call{method: http.MethodGet, path: api.ReservationPath(id), kind: read}, nil)
}

// Loads is the home node's active load per rank (GET /loads); empty
// filters do not filter.
func (c *Client) Loads(ctx context.Context, model, tenant string) ([]api.PartitionLoads, error) {
	q := partitionQuery(model, tenant)
	var out []api.PartitionLoads
	return out, c.send(ctx, call{method: http.MethodGet, path: withQuery(api.PathLoads, q), kind: read}, nil, &out)
}

// PotentialLoads projects every schedulable rank's load if the prompt were
// booked on it (POST /potential_loads).
func (c *Client) PotentialLoads(ctx context.Context, prompt api.Prompt) ([]api.PotentialLoad, error) {
	var out []api.PotentialLoad
	return out, c.send(ctx, call{method: http.MethodPost, path: api.PathPotentialLoads, kind: read, session: true}, prompt, &out)
}

// OverlapScores reports every schedulable rank's tiered match for the
// prompt (POST /overlap_scores).
func (c *Client) OverlapScores(ctx context.Context, prompt api.Prompt) (*api.OverlapScores, error) {
	return decoded[api.OverlapScores](ctx, c, call{method: http.MethodPost, path: api.PathOverlapScores, kind: read, session: true}, prompt)
}

// Dump is the home node's index snapshot (GET /dump).
func (c *Client) Dump(ctx context.Context) (api.Dump, error) {
	var out api.Dump
	return out, c.send(ctx, call{method: http.MethodGet, path: api.PathDump, kind: read}, nil, &out)
}

// ClusterStatus is the home node's view of the cluster (GET
// /cluster/status).
func (c *Client) ClusterStatus(ctx context.Context) (*api.ClusterStatus, error) {
	return decoded[api.ClusterStatus](ctx, c, call{method: http.MethodGet, path: api.PathClusterStatus, kind: read}, nil)
}

// Join asks the cluster to admit a member (POST /cluster/join).
func (c *Client) Join(ctx context.Context, req api.JoinRequest) (*api.ClusterStatus, error) {
	return decoded[api.ClusterStatus](ctx, c, call{method: http.MethodPost, path: api.PathClusterJoin, kind: write}, req)
}

// Remove removes a member (POST /cluster/remove); removing an absent id is
// a no-op.
func (c *Client) Remove(ctx context.Context, id string) (*api.ClusterStatus, error) {
	return decoded[api.ClusterStatus](ctx, c, call{method: http.MethodPost, path: api.PathClusterRemove, kind: write}, api.RemoveRequest{ID: id})
}

// StepDown hands leadership to another voter (POST /cluster/stepdown). It
// is not retried once it may have acted: a second step-down would move
// leadership again.
func (c *Client) StepDown(ctx context.Context) (*api.ClusterStatus, error) {
	return decoded[api.ClusterStatus](ctx, c, call{method: http.MethodPost, path: api.PathClusterStepDown, kind: writeOnce}, nil)
}

// SetMetadata publishes a member's addresses (POST /cluster/metadata).
func (c *Client) SetMetadata(ctx context.Context, meta api.NodeMeta) (*api.NodeMeta, error) {
	return decoded[api.NodeMeta](ctx, c, call{method: http.MethodPost, path: api.PathClusterMetadata, kind: write}, meta)
}

// RegisterReplicaSyncPeer makes the home node follow another node's
// replica sync (POST /replica_sync/register_peer); created is false when it
// already did.
func (c *Client) RegisterReplicaSyncPeer(ctx context.Context, endpoint string) (created bool, err error) {
	var info ResponseInfo
	err = c.send(WithResponseInfo(ctx, &info), call{method: http.MethodPost, path: api.PathReplicaSyncRegister, kind: booking},
		api.ReplicaSyncPeerRequest{Endpoint: endpoint}, nil)
	return err == nil && info.Status == http.StatusCreated, err
}

// DeregisterReplicaSyncPeer makes the home node stop following a peer it
// was told to follow (POST /replica_sync/deregister_peer).
func (c *Client) DeregisterReplicaSyncPeer(ctx context.Context, endpoint string) error {
	return c.send(ctx, call{method: http.MethodPost, path: api.PathReplicaSyncDeregister, kind: booking},
		api.ReplicaSyncPeerRequest{Endpoint: endpoint}, nil)
}

// ReplicaSyncPeers lists the endpoints the home node follows, sorted (GET
// /replica_sync/peers; empty when replica sync is off).
func (c *Client) ReplicaSyncPeers(ctx context.Context) ([]string, error) {
	var out []string
	err := c.send(ctx, call{method: http.MethodGet, path: api.PathReplicaSyncPeers, kind: read}, nil, &out)
	return out, err
}

// ReplicaSyncStatus describes the home node's replica sync: its endpoint
// and each peer's source, state and counters (GET /replica_sync/status).
func (c *Client) ReplicaSyncStatus(ctx context.Context) (*api.ReplicaSyncStatus, error) {
	return decoded[api.ReplicaSyncStatus](ctx, c, call{method: http.MethodGet, path: api.PathReplicaSyncStatus, kind: read}, nil)
}

// checkPathID refuses, before anything is sent, a reservation id that no
// node would accept (api.ValidateID): in a path it would name another
// route, or none, and the answer would be a misleading 404.
func checkPathID(id string) error {
	if err := api.ValidateID(id); err != nil {
		return fmt.Errorf("client: reservation id %q: %w", id, err)
	}
	return nil
}

// SetBusyThreshold sets the thresholds the request carries for its model
// and keeps the model's others (POST /busy_threshold). With neither
// threshold it only reads the model's.
func (c *Client) SetBusyThreshold(ctx context.Context, req api.BusyThresholdRequest) (*api.BusyThreshold, error) {
	return decoded[api.BusyThreshold](ctx, c, call{method: http.MethodPost, path: api.PathBusyThreshold, kind: write}, req)
}

// ClearBusyThreshold unsets both of a model's busy thresholds (DELETE
// /busy_threshold?model=): its workers are never shed.
func (c *Client) ClearBusyThreshold(ctx context.Context, model string) (*api.BusyThreshold, error) {
	path := withQuery(api.PathBusyThreshold, url.Values{api.QueryModel: {model}})
	return decoded[api.BusyThreshold](ctx, c, call{method: http.MethodDelete, path: path, kind: write}, nil)
}

// BusyThresholds lists the models with a busy threshold set (GET
// /busy_threshold).
func (c *Client) BusyThresholds(ctx context.Context, linearizable bool) (*api.BusyThresholds, error) {
	return decoded[api.BusyThresholds](ctx, c, catalogRead(api.PathBusyThreshold, url.Values{}, linearizable), nil)
}

// SetPolicy stores a partition's selection policy, replacing its entry,
// or with model_name api.AnyModel ("*") the cluster default (PUT
// /policies). Parameters are numbers, or booleans for boolean
// parameters.
func (c *Client) SetPolicy(ctx context.Context, req api.PolicyRequest) (*api.PolicyWritten, error) {
	return decoded[api.PolicyWritten](ctx, c, call{method: http.MethodPut, path: api.PathPolicies, kind: write}, req)
}

// DeletePolicy removes a partition's selection policy, or with model
// api.AnyModel the cluster default (DELETE /policies?model_name=&
// tenant_id=); an empty tenant is "default" for a model, none for "*".
// The partition then runs the cluster default, and the cluster default
// each node's --policy. An absent entry is not_found.
func (c *Client) DeletePolicy(ctx context.Context, model, tenant string) (*api.PolicyWritten, error) {
	q := url.Values{api.QueryModelName: {model}}
	if tenant != "" {
		q.Set(api.QueryTenantID, tenant)
	}
	return decoded[api.PolicyWritten](ctx, c, call{method: http.MethodDelete, path: withQuery(api.PathPolicies, q), kind: write}, nil)
}

// Policies lists the catalog's policy entries, sorted, with the answering
// node's own default (GET /policies).
func (c *Client) Policies(ctx context.Context, linearizable bool) (*api.Policies, error) {
	return decoded[api.Policies](ctx, c, catalogRead(api.PathPolicies, url.Values{}, linearizable), nil)
}
