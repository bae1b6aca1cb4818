package http

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/kvselect/kvselect/api"
	"github.com/kvselect/kvselect/fsm"
	"github.com/kvselect/kvselect/scheduler"
)

// tenantOf resolves routing_group, Dynamo's newer name for tenant_id, in a
// body or a query: either may be given, or both with the same value.
// field names the alias in errors ("routing_group" in both places).
func tenantOf(tenantID, routingGroup string) (string, error) {
	if routingGroup != "" && tenantID != "" && routingGroup != tenantID {
		return "", badRequest(api.QueryRoutingGroup, "is another name for tenant_id; %q and %q differ", routingGroup, tenantID)
	}
	if tenantID != "" {
		return tenantID, nil
	}
	return routingGroup, nil
}

// queryPartition reads the model_name and tenant_id (or routing_group)
// filters of a listing; empty means "any".
func queryPartition(r *http.Request) (model, tenant string, err error) {
	q := r.URL.Query()
	tenant, err = tenantOf(q.Get(api.QueryTenantID), q.Get(api.QueryRoutingGroup))
	return q.Get(api.QueryModelName), tenant, err
}

// partitionOf returns the request's (model, tenant) scope with defaults.
func partitionOf(in *api.Prompt) (fsm.PartitionKey, error) {
	k := fsm.PartitionKey{Model: fsm.DefaultScope, Tenant: fsm.DefaultScope}
	for _, f := range []struct{ field, v string }{
		{"model_name", in.ModelName}, {"tenant_id", in.TenantID}, {"routing_group", in.RoutingGroup},
	} {
		if len(f.v) > fsm.MaxStringLen {
			return k, badRequest(f.field, "longer than %d bytes", fsm.MaxStringLen)
		}
	}
	tenant, err := tenantOf(in.TenantID, in.RoutingGroup)
	if err != nil {
		return k, err
	}
	if in.ModelName != "" {
		k.Model = in.ModelName
	}
	if tenant != "" {
		k.Tenant = tenant
	}
	return k, nil
}

// partitionErr turns a scheduler's "nothing schedulable" for key (and,
// for a booking, "no such worker") into unknown_partition when the
// catalog never held a worker for key (fsm.Catalog.CheckPartitionKnown):
// a misspelt model_name or tenant_id must not look like an outage. Asked
// after the scheduler failed, so an answer the scheduler gave stands.
//
// It is the one place that decides between the two, and says
// unknown_partition ("do not retry") only when this node's catalog can
// tell: the node has caught up with a leader (catalogUnsettled), and has
// applied the catalog index the request asks for (minIndex:
// min_catalog_index or X-Kvselect-Index, 0 for none). A follower that
// has not applied a registration yet, or a node still catching up after
// a restart, answers not_ready with Retry-After instead: the partition may
// be in entries it has yet to apply. A registration the node has not
// even received cannot be told from a misspelling by any node but the
// leader; a client that registers and selects at once sends the index
// its registration returned (SPEC §3.1).
//
// Every write leaves a moment in which an entry is committed but not yet
// applied, even on a lone leader; a node that is only that far behind
// waits (up to readyzApplyWait, as /readyz does) to apply what it knew
// was committed, then judges the catalog it then holds.
func (s *Service) partitionErr(ctx context.Context, key fsm.PartitionKey, minIndex uint64, err error) error {
	if !errors.Is(err, scheduler.ErrNotReady) && !errors.Is(err, scheduler.ErrWorkerNotFound) {
		return err
	}
	s.awaitCommitApplied(ctx)
	cat := s.cfg.Catalog.Catalog()
	unknown := cat.CheckPartitionKnown(key)
	if unknown == nil {
		return err
	}
	if why := s.catalogUnsettled(cat.Index(), minIndex); why != "" {
		return fmt.Errorf("%w: %s, so it cannot tell whether a worker was registered for model_name %q tenant_id %q; retry",
			errCatalogUnsettled, why, key.Model, key.Tenant)
	}
	return unknown
}

// awaitCommitApplied waits, up to readyzApplyWait, until this node has
// applied the commit index it knows now, when it follows a leader and is
// behind it. Raft's applied index, not the catalog's: entries the FSM
// does not see (barriers, configuration changes) count too.
func (s *Service) awaitCommitApplied(ctx context.Context) {
	st := s.cfg.Cluster.Status()
	if st.Leader.ID == "" || st.AppliedIndex >= st.CommitIndex {
		return
	}
	commit := st.CommitIndex
	ctx, cancel := context.WithTimeout(ctx, readyzApplyWait)
	defer cancel()
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for s.cfg.Cluster.Status().AppliedIndex < commit {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// catalogUnsettled says why this node's catalog, at catalogIndex, may lack
// entries that are committed, or "" when it has every entry it knows to
// be committed: it has caught up with a leader since it started (the
// latch of /readyz?for=selection), CatchUpReason finds it caught up now,
// and it has applied minIndex.
func (s *Service) catalogUnsettled(catalogIndex, minIndex uint64) string {
	st := s.cfg.Cluster.Status()
	if reason, why := CatchUpReason(st); reason != "" {
		return "this node is not caught up with a leader (" + why + ")"
	}
	if !s.caughtUp(st) {
		return "this node has not caught up with a leader since it started"
	}
	if minIndex > catalogIndex {
		return fmt.Sprintf("this node's catalog index %d is behind the requested index %d", catalogIndex, minIndex)
	}
	return ""
}

// promptIndex is the catalog index a request with prompt p asks for (0
// for none); waitSelectionCatalog has already refused a malformed one.
func promptIndex(r *http.Request, p *api.Prompt) uint64 {
	idx, _ := requestedIndex(r, p.MinCatalogIndex)
	return idx
}

// promptOf validates the prompt: either token_ids, or the hash form
// (block_hashes, required when the node looks the prompt up, with
// sequence_hashes of the same length, and isl_tokens > 0).
func promptOf(in *api.Prompt, needBlockHashes bool) (scheduler.Prompt, error) {
	pr := scheduler.Prompt{LoraName: in.LoraName}
	if in.TokenIDs != nil {
		if in.BlockHashes != nil || in.SequenceHashes != nil || in.ISLTokens != 0 {
			return pr, badRequest("token_ids", "give either token_ids, or block_hashes with sequence_hashes and isl_tokens, not both")
		}
		if len(in.TokenIDs) == 0 {
			return pr, badRequest("token_ids", "must not be empty")
		}
		pr.Tokens, pr.HasTokens, pr.ISL = in.TokenIDs, true, int64(len(in.TokenIDs))
		return pr, nil
	}
	if in.LoraName != "" {
		return pr, badRequest("lora_name", "only applies with token_ids (block hashes already include it)")
	}
	switch {
	case in.BlockHashes != nil:
		pr.BlockHashes = in.BlockHashes
	case needBlockHashes:
		return pr, badRequest("block_hashes", "required (or give token_ids)")
	}
	switch {
	case in.SequenceHashes != nil:
		pr.SequenceHashes = in.SequenceHashes
	case needBlockHashes:
		return pr, badRequest("sequence_hashes", "required (or give token_ids)")
	default:
		pr.SequenceHashes = []uint64{}
	}
	if in.BlockHashes != nil && len(pr.SequenceHashes) != len(pr.BlockHashes) {
		return pr, badRequest("sequence_hashes", "has %d entries but block_hashes has %d; they must match",
			len(pr.SequenceHashes), len(pr.BlockHashes))
	}
	if in.ISLTokens <= 0 || in.ISLTokens > api.MaxISLTokens {
		return pr, badRequest("isl_tokens", "required: an integer from 1 to %d, got %d", int64(api.MaxISLTokens), in.ISLTokens)
	}
	pr.ISL = in.ISLTokens
	return pr, nil
}

func overrideOf(in *api.RouterConfigOverride) (scheduler.Override, error) {
	var o scheduler.Override
	if in == nil {
		return o, nil
	}
	o.Policy = in.Policy
	for _, f := range []struct {
		name string
		v    *float64
	}{
		{"overlap_score_credit", in.OverlapScoreCredit}, {"prefill_load_scale", in.PrefillLoadScale},
		{"decode_active_request_weight", in.DecodeActiveRequestWeight},
		{"overlap_score_weight", in.OverlapScoreWeight}, {"router_temperature", in.RouterTemperature},
	} {
		if f.v == nil {
			continue
		}
		if *f.v < 0 || math.IsInf(*f.v, 0) || math.IsNaN(*f.v) {
			return o, badRequest("router_config_override."+f.name, "must be a finite number >= 0, got %v", *f.v)
		}
		if o.Params == nil {
			o.Params = map[string]float64{}
		}
		o.Params[f.name] = *f.v
	}
	for _, f := range []struct {
		name string
		v    *bool
	}{{"track_prefill_tokens", in.TrackPrefillTokens}, {"assume_kv_reuse", in.AssumeKVReuse}} {
		if f.v == nil {
			continue
		}
		if o.Params == nil {
			o.Params = map[string]float64{}
		}
		o.Params[f.name] = 0
		if *f.v {
			o.Params[f.name] = 1
		}
	}
	return o, nil
}

func (s *Service) selectWorker(w http.ResponseWriter, r *http.Request) error {
	return s.doSelect(w, r, false)
}

func (s *Service) selectAndReserve(w http.ResponseWriter, r *http.Request) error {
	return s.doSelect(w, r, true)
}

// tokenPool holds token id buffers for doSelect: the scheduler hashes a
// prompt's tokens into block hashes and keeps nothing of the tokens
// themselves, so a request's buffer serves the next one.
var tokenPool = sync.Pool{New: func() any { return new(api.TokenIDs) }}

// pooledTokensMax bounds the buffers tokenPool keeps (256 KiB).
const pooledTokensMax = 64 << 10

func (s *Service) doSelect(w http.ResponseWriter, r *http.Request, reserve bool) error {
	tb := tokenPool.Get().(*api.TokenIDs)
	in := api.SelectRequest{Prompt: api.Prompt{TokenIDs: (*tb)[:0]}}
	defer func() {
		if c := cap(in.TokenIDs); c > cap(*tb) && c <= pooledTokensMax {
			*tb = in.TokenIDs[:0]
		}
		tokenPool.Put(tb)
	}()
	if err := decodePooled(w, r, func(b []byte) error { return api.DecodeSelect(b, &in) }); err != nil {
		return err
	}
	req := scheduler.SelectRequest{Reserve: reserve}
	var err error
	if req.Partition, err = partitionOf(&in.Prompt); err != nil {
		return err
	}
	if req.Prompt, err = promptOf(&in.Prompt, true); err != nil {
		return err
	}
	if req.Override, err = overrideOf(in.RouterConfigOverride); err != nil {
		return err
	}
	req.SelectionID = string(in.SelectionID)
	if in.ReservationID != "" {
		if !reserve {
			return badRequest("reservation_id", "only %s books a reservation", api.PathSelectAndReserve)
		}
		req.ReservationID = string(in.ReservationID)
	}
	if err := s.waitSelectionCatalog(w, r, &in.Prompt); err != nil {
		return err
	}
	sel, err := s.cfg.Selector.Select(req)
	if err != nil {
		return s.partitionErr(r.Context(), req.Partition, promptIndex(r, &in.Prompt), err)
	}
	if len(sel.IgnoredOverrides) > 0 {
		w.Header().Set(api.HeaderIgnoredOverride, strings.Join(sel.IgnoredOverrides, ","))
	}
	if sel.Replayed {
		w.Header().Set(api.HeaderReplayed, "true")
	}
	return writeJSON(w, http.StatusOK, api.Selection{
		SelectionID: string(in.SelectionID), ReservationID: sel.ReservationID,
		ModelName: sel.Partition.Model, TenantID: sel.Partition.Tenant,
		WorkerID: sel.WorkerID, DPRank: sel.DPRank, Endpoint: sel.Endpoint, BlockSize: sel.BlockSize,
		Overlap: api.Overlap{LongestMatched: sel.Overlap.LongestMatched, GPU: sel.Overlap.GPU,
			DP: sel.Overlap.DP, CPU: sel.Overlap.CPU, Disk: sel.Overlap.Disk},
		EffectivePrefillTokens: sel.EffectivePrefillTokens,
	})
}

func (s *Service) potentialLoads(w http.ResponseWriter, r *http.Request) error {
	key, pr, idx, err := s.decodePrompt(w, r)
	if err != nil {
		return err
	}
	loads, err := s.cfg.Selector.PotentialLoads(key, pr)
	if err != nil {
		return s.partitionErr(r.Context(), key, idx, err)
	}
	out := make([]api.PotentialLoad, len(loads))
	for i, l := range loads {
		out[i] = api.PotentialLoad(l)
	}
	return writeJSON(w, http.StatusOK, out)
}

// overlapScores reports each rank's tiers cumulatively, as Dynamo does:
// device ≤ host_pinned ≤ disk, with the extensions alone beside them.
func (s *Service) overlapScores(w http.ResponseWriter, r *http.Request) error {
	key, pr, idx, err := s.decodePrompt(w, r)
	if err != nil {
		return err
	}
	sc, err := s.cfg.Selector.OverlapScores(key, pr)
	if err != nil {
		return s.partitionErr(r.Context(), key, idx, err)
	}
	out := api.OverlapScores{BlockSize: sc.BlockSize, NumBlocks: sc.NumBlocks, Workers: make([]api.OverlapRow, len(sc.Rows))}
	for i, row := range sc.Rows {
		host := row.DeviceBlocks + row.HostExt
		out.Workers[i] = api.OverlapRow{WorkerID: row.WorkerID, DPRank: row.DPRank, DeviceBlocks: row.DeviceBlocks,
			HostPinnedBlocks: host, DiskBlocks: host + row.DiskExt,
			HostPinnedExtensionBlocks: row.HostExt, DiskExtensionBlocks: row.DiskExt, CreditBlocks: row.CreditBlocks}
	}
	return writeJSON(w, http.StatusOK, out)
}

// decodePrompt reads the body of the inspection routes that take a prompt,
// and the catalog index the request asks for.
func (s *Service) decodePrompt(w http.ResponseWriter, r *http.Request) (fsm.PartitionKey, scheduler.Prompt, uint64, error) {
	var in api.Prompt
	if err := decodePooled(w, r, func(b []byte) error { return api.DecodePrompt(b, &in) }); err != nil {
		return fsm.PartitionKey{}, scheduler.Prompt{}, 0, err
	}
	key, err := partitionOf(&in)
	if err != nil {
		return key, scheduler.Prompt{}, 0, err
	}
	pr, err := promptOf(&in, true)
	if err != nil {
		return key, pr, 0, err
	}
	return key, pr, promptIndex(r, &in), s.waitSelectionCatalog(w, r, &in)
}
