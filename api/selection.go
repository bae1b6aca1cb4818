package api

// Prompt is the prompt part shared by /select, /select_and_reserve,
// /reservations, /potential_loads and /overlap_scores (SPEC §3.3): either
// the hash form (BlockHashes drive the index lookup, SequenceHashes the
// active load, ISLTokens the input length) or TokenIDs, which the node
// hashes itself with the partition's block size (and LoraName).
type Prompt struct {
	ModelName string `json:"model_name,omitempty"`
	TenantID  string `json:"tenant_id,omitempty"`
	// RoutingGroup is Dynamo's newer name for tenant_id; give one or
	// the other (or both, equal).
	RoutingGroup   string   `json:"routing_group,omitempty"`
	BlockHashes    Hashes   `json:"block_hashes,omitempty"`
	SequenceHashes Hashes   `json:"sequence_hashes,omitempty"`
	ISLTokens      int64    `json:"isl_tokens,omitempty"`
	TokenIDs       TokenIDs `json:"token_ids,omitempty"`
	LoraName       string   `json:"lora_name,omitempty"`
	// MinCatalogIndex makes the node wait (up to 2 s) until it has
	// applied this catalog index; HeaderIndex does the same. A node that
	// does not get there answers from its own catalog all the same, with
	// HeaderCatalogBehind, unless RequireCatalog.
	MinCatalogIndex uint64 `json:"min_catalog_index,omitempty"`
	// RequireCatalog makes a node that has not reached MinCatalogIndex
	// in time answer 503 catalog_behind instead of selecting from the
	// catalog it has.
	RequireCatalog bool `json:"require_catalog,omitempty"`
}

// RouterConfigOverride adjusts one selection's scheduling.
// Policy picks another policy for this request; the numbers are policy
// parameters (a policy that does not take one refuses it), the booleans
// accounting settings every policy takes (SPEC §6.2).
type RouterConfigOverride struct {
	Policy                    string   `json:"policy,omitempty"`
	OverlapScoreCredit        *float64 `json:"overlap_score_credit,omitempty"`
	PrefillLoadScale          *float64 `json:"prefill_load_scale,omitempty"`
	DecodeActiveRequestWeight *float64 `json:"decode_active_request_weight,omitempty"`
	OverlapScoreWeight        *float64 `json:"overlap_score_weight,omitempty"`
	RouterTemperature         *float64 `json:"router_temperature,omitempty"`
	TrackPrefillTokens        *bool    `json:"track_prefill_tokens,omitempty"`
	AssumeKVReuse             *bool    `json:"assume_kv_reuse,omitempty"`
}

// SelectRequest is the body of POST /select and /select_and_reserve.
type SelectRequest struct {
	Prompt
	RouterConfigOverride *RouterConfigOverride `json:"router_config_override,omitempty"`
	// SelectionID is echoed. On /select the node also remembers the
	// choice for a short time, so that POST /reservations can book
	// exactly it by selection_id alone.
	SelectionID ID `json:"selection_id,omitempty"`
	// ReservationID names the booking of /select_and_reserve (a UUID is
	// generated when it is absent); /select refuses it.
	ReservationID ID `json:"reservation_id,omitempty"`
}

// Selection answers /select and /select_and_reserve (seed 000's shape).
type Selection struct {
	SelectionID   string  `json:"selection_id,omitempty"`
	ReservationID string  `json:"reservation_id,omitempty"`
	ModelName     string  `json:"model_name"`
	TenantID      string  `json:"tenant_id"`
	WorkerID      uint64  `json:"worker_id"`
	DPRank        uint32  `json:"dp_rank"`
	Endpoint      string  `json:"endpoint"`
	BlockSize     uint32  `json:"block_size"`
	Overlap       Overlap `json:"overlap"`
	// EffectivePrefillTokens is what a booking records as prefill load:
	// isl minus the chosen rank's weighted cache credit.
	EffectivePrefillTokens int64 `json:"effective_prefill_tokens"`
}

// Overlap is the chosen worker's match in tokens: GPU the best device
// prefix over its ranks, CPU and Disk the best cumulative prefixes with
// host and then disk blocks (GPU ≤ CPU ≤ Disk), DP every rank's device
// prefix, LongestMatched = Disk.
type Overlap struct {
	LongestMatched int64            `json:"longest_matched"`
	GPU            int64            `json:"gpu"`
	DP             map[uint32]int64 `json:"dp"`
	CPU            int64            `json:"cpu"`
	Disk           int64            `json:"disk"`
}
