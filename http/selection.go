package http

import (
	"encoding/json"
	"math"
	"net/http"

	"github.com/kvselect/kvselect/fsm"
	"github.com/kvselect/kvselect/scheduler"
)

// promptInput is the prompt part shared by the selection routes.
type promptInput struct {
	ModelName            *string         `json:"model_name"`
	TenantID             *string         `json:"tenant_id"`
	BlockHashes          json.RawMessage `json:"block_hashes"`
	SequenceHashes       json.RawMessage `json:"sequence_hashes"`
	ISLTokens            *int64          `json:"isl_tokens"`
	TokenIDs             json.RawMessage `json:"token_ids"`
	LoraName             *string         `json:"lora_name"`
	RouterConfigOverride *overrideInput  `json:"router_config_override"`
	MinCatalogIndex      *uint64         `json:"min_catalog_index"`
}

type overrideInput struct {
	OverlapScoreWeight *float64 `json:"overlap_score_weight"`
	RouterTemperature  *float64 `json:"router_temperature"`
}

// promptRules says which hash fields a route needs in the hash form.
type promptRules struct {
	needBlockHashes bool // selection routes look the prompt up in the index
}

// partition returns the request's (model, tenant) scope with defaults.
func (in *promptInput) partition() (fsm.PartitionKey, error) {
	k := fsm.PartitionKey{Model: fsm.DefaultScope, Tenant: fsm.DefaultScope}
	for _, f := range []struct {
		field string
		v     *string
	}{{"model_name", in.ModelName}, {"tenant_id", in.TenantID}} {
		if f.v != nil && len(*f.v) > fsm.MaxStringLen {
			return k, badRequest(f.field, "longer than %d bytes", fsm.MaxStringLen)
		}
	}
	if in.ModelName != nil && *in.ModelName != "" {
		k.Model = *in.ModelName
	}
	if in.TenantID != nil && *in.TenantID != "" {
		k.Tenant = *in.TenantID
	}
	return k, nil
}

// prompt validates the prompt: either token_ids, or block_hashes with
// sequence_hashes of the same length and isl_tokens > 0.
func (in *promptInput) prompt(rules promptRules) (scheduler.Prompt, error) {
	var pr scheduler.Prompt
	if in.LoraName != nil {
		pr.LoraName = *in.LoraName
	}
	if present(in.TokenIDs) {
		if present(in.BlockHashes) || present(in.SequenceHashes) || in.ISLTokens != nil {
			return pr, badRequest("token_ids", "give either token_ids, or block_hashes with sequence_hashes and isl_tokens, not both")
		}
		tokens, err := parseTokens("token_ids", in.TokenIDs)
		if err != nil {
			return pr, err
		}
		if len(tokens) == 0 {
			return pr, badRequest("token_ids", "must not be empty")
		}
		pr.Tokens, pr.HasTokens, pr.ISL = tokens, true, int64(len(tokens))
		return pr, nil
	}
	if in.LoraName != nil {
		return pr, badRequest("lora_name", "only applies with token_ids (block hashes already include it)")
	}
	var err error
	switch {
	case present(in.BlockHashes):
		if pr.BlockHashes, err = parseHashes("block_hashes", in.BlockHashes); err != nil {
			return pr, err
		}
	case rules.needBlockHashes:
		return pr, badRequest("block_hashes", "required (or give token_ids)")
	}
	if !present(in.SequenceHashes) {
		if rules.needBlockHashes {
			return pr, badRequest("sequence_hashes", "required (or give token_ids)")
		}
		pr.SequenceHashes = []uint64{}
	} else if pr.SequenceHashes, err = parseHashes("sequence_hashes", in.SequenceHashes); err != nil {
		return pr, err
	}
	if present(in.BlockHashes) && len(pr.SequenceHashes) != len(pr.BlockHashes) {
		return pr, badRequest("sequence_hashes", "has %d entries but block_hashes has %d; they must match",
			len(pr.SequenceHashes), len(pr.BlockHashes))
	}
	if in.ISLTokens == nil {
		return pr, badRequest("isl_tokens", "required")
	}
	if *in.ISLTokens <= 0 || *in.ISLTokens > scheduler.MaxISLTokens {
		return pr, badRequest("isl_tokens", "must be between 1 and %d, got %d", int64(scheduler.MaxISLTokens), *in.ISLTokens)
	}
	pr.ISL = *in.ISLTokens
	return pr, nil
}

func (in *promptInput) override() (scheduler.Override, error) {
	var o scheduler.Override
	if in.RouterConfigOverride == nil {
		return o, nil
	}
	for _, f := range []struct {
		field string
		v     *float64
	}{
		{"router_config_override.overlap_score_weight", in.RouterConfigOverride.OverlapScoreWeight},
		{"router_config_override.router_temperature", in.RouterConfigOverride.RouterTemperature},
	} {
		if f.v != nil && (*f.v < 0 || math.IsInf(*f.v, 0) || math.IsNaN(*f.v)) {
			return o, badRequest(f.field, "must be a finite number >= 0, got %v", *f.v)
		}
	}
	o.OverlapScoreWeight = in.RouterConfigOverride.OverlapScoreWeight
	o.Temperature = in.RouterConfigOverride.RouterTemperature
	return o, nil
}

// selectInput is the body of /select and /select_and_reserve.
type selectInput struct {
	promptInput
	SelectionID   *string `json:"selection_id"`
	ReservationID *string `json:"reservation_id"`
}

// selectionJSON is the seed's selection shape.
type selectionJSON struct {
	SelectionID            *string     `json:"selection_id,omitempty"`
	ReservationID          string      `json:"reservation_id,omitempty"`
	ModelName              string      `json:"model_name"`
	TenantID               string      `json:"tenant_id"`
	WorkerID               uint64      `json:"worker_id"`
	DPRank                 uint32      `json:"dp_rank"`
	Endpoint               string      `json:"endpoint"`
	BlockSize              uint32      `json:"block_size"`
	Overlap                overlapJSON `json:"overlap"`
	EffectivePrefillTokens int64       `json:"effective_prefill_tokens"`
}

type overlapJSON struct {
	LongestMatched int64            `json:"longest_matched"`
	GPU            int64            `json:"gpu"`
	DP             map[uint32]int64 `json:"dp"`
	CPU            int64            `json:"cpu"`
	Disk           int64            `json:"disk"`
}

func (s *Service) selectWorker(w http.ResponseWriter, r *http.Request) error {
	return s.doSelect(w, r, false)
}

func (s *Service) selectAndReserve(w http.ResponseWriter, r *http.Request) error {
	return s.doSelect(w, r, true)
}

func (s *Service) doSelect(w http.ResponseWriter, r *http.Request, reserve bool) error {
	var in selectInput
	if err := decodeBody(w, r, &in, false); err != nil {
		return err
	}
	req := scheduler.SelectRequest{Reserve: reserve}
	var err error
	if req.Partition, err = in.partition(); err != nil {
		return err
	}
	if req.Prompt, err = in.prompt(promptRules{needBlockHashes: true}); err != nil {
		return err
	}
	if req.Override, err = in.override(); err != nil {
		return err
	}
	if in.ReservationID != nil {
		if !reserve {
			return badRequest("reservation_id", "only /select_and_reserve books a reservation")
		}
		if err := checkReservationID(*in.ReservationID); err != nil {
			return err
		}
		req.ReservationID = *in.ReservationID
	}
	if err := s.waitCatalog(r, in.MinCatalogIndex); err != nil {
		return err
	}
	sel, err := s.cfg.Scheduler.Select(req)
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, selectionJSON{
		SelectionID: in.SelectionID, ReservationID: sel.ReservationID,
		ModelName: sel.Partition.Model, TenantID: sel.Partition.Tenant,
		WorkerID: sel.WorkerID, DPRank: sel.DPRank, Endpoint: sel.Endpoint, BlockSize: sel.BlockSize,
		Overlap: overlapJSON{LongestMatched: sel.Overlap.LongestMatched, GPU: sel.Overlap.GPU,
			DP: sel.Overlap.DP, CPU: sel.Overlap.CPU, Disk: sel.Overlap.Disk},
		EffectivePrefillTokens: sel.EffectivePrefillTokens,
	})
}

func checkReservationID(id string) error {
	if id == "" {
		return badRequest("reservation_id", "must not be empty")
	}
	if len(id) > fsm.MaxStringLen {
		return badRequest("reservation_id", "longer than %d bytes", fsm.MaxStringLen)
	}
	return nil
}

// potentialLoadJSON is one row of /potential_loads.
type potentialLoadJSON struct {
	WorkerID               uint64  `json:"worker_id"`
	DPRank                 uint32  `json:"dp_rank"`
	PotentialPrefillTokens int64   `json:"potential_prefill_tokens"`
	PotentialDecodeBlocks  float64 `json:"potential_decode_blocks"`
	ActiveRequests         int     `json:"active_requests"`
}

func (s *Service) potentialLoads(w http.ResponseWriter, r *http.Request) error {
	key, pr, err := s.decodePrompt(w, r)
	if err != nil {
		return err
	}
	loads, err := s.cfg.Scheduler.PotentialLoads(key, pr)
	if err != nil {
		return err
	}
	out := make([]potentialLoadJSON, len(loads))
	for i, l := range loads {
		out[i] = potentialLoadJSON(l)
	}
	return writeJSON(w, http.StatusOK, out)
}

type overlapScoresJSON struct {
	BlockSize uint32           `json:"block_size"`
	NumBlocks int              `json:"num_blocks"`
	Workers   []overlapRowJSON `json:"workers"`
}

type overlapRowJSON struct {
	WorkerID         uint64  `json:"worker_id"`
	DPRank           uint32  `json:"dp_rank"`
	DeviceBlocks     uint32  `json:"device_blocks"`
	HostPinnedBlocks uint32  `json:"host_pinned_blocks"`
	DiskBlocks       uint32  `json:"disk_blocks"`
	CreditBlocks     float64 `json:"credit_blocks"`
}

func (s *Service) overlapScores(w http.ResponseWriter, r *http.Request) error {
	key, pr, err := s.decodePrompt(w, r)
	if err != nil {
		return err
	}
	sc, err := s.cfg.Scheduler.OverlapScores(key, pr)
	if err != nil {
		return err
	}
	out := overlapScoresJSON{BlockSize: sc.BlockSize, NumBlocks: sc.NumBlocks, Workers: make([]overlapRowJSON, len(sc.Rows))}
	for i, row := range sc.Rows {
		out.Workers[i] = overlapRowJSON{WorkerID: row.WorkerID, DPRank: row.DPRank, DeviceBlocks: row.DeviceBlocks,
			HostPinnedBlocks: row.HostBlocks, DiskBlocks: row.DiskBlocks, CreditBlocks: row.CreditBlocks}
	}
	return writeJSON(w, http.StatusOK, out)
}

// decodePrompt reads the body of the inspection routes that take a prompt.
func (s *Service) decodePrompt(w http.ResponseWriter, r *http.Request) (fsm.PartitionKey, scheduler.Prompt, error) {
	var in promptInput
	if err := decodeBody(w, r, &in, false); err != nil {
		return fsm.PartitionKey{}, scheduler.Prompt{}, err
	}
	key, err := in.partition()
	if err != nil {
		return key, scheduler.Prompt{}, err
	}
	pr, err := in.prompt(promptRules{needBlockHashes: true})
	if err != nil {
		return key, pr, err
	}
	return key, pr, s.waitCatalog(r, in.MinCatalogIndex)
}
