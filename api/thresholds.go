package api

// Busy thresholds (load shedding, SPEC §8, seed 001). The shapes are
// Dynamo's, so its tooling and scripts work against kvselect unchanged.

// BusyThresholdRequest is the body of POST /busy_threshold. A threshold
// given is set; one left out (or null) keeps its value. With neither, the
// request only reads the model's thresholds, as in Dynamo.
type BusyThresholdRequest struct {
	Model string `json:"model"`
	// ActiveDecodeBlocksThreshold is a fraction in [0, 1] of a rank's
	// total_kv_blocks.
	ActiveDecodeBlocksThreshold *float64 `json:"active_decode_blocks_threshold,omitempty"`
	// ActivePrefillTokensThreshold is a token count (≥ 0).
	ActivePrefillTokensThreshold *int64 `json:"active_prefill_tokens_threshold,omitempty"`
}

// BusyThreshold is one model's thresholds; null is a threshold not set
// (not checked).
type BusyThreshold struct {
	Model                        string   `json:"model"`
	ActiveDecodeBlocksThreshold  *float64 `json:"active_decode_blocks_threshold"`
	ActivePrefillTokensThreshold *uint64  `json:"active_prefill_tokens_threshold"`
}

// BusyThresholds answers GET /busy_threshold: every model with at least
// one threshold set, sorted by model.
type BusyThresholds struct {
	Thresholds []BusyThreshold `json:"thresholds"`
}
