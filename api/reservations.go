package api

import "time"

// ReserveRequest is the body of POST /reservations (SPEC §3.4): a
// reservation id and either SelectionID, which books a choice /select
// remembered, or the worker rank and the prompt.
type ReserveRequest struct {
	ReservationID ID `json:"reservation_id"`
	// SelectionID books exactly the choice a /select with this
	// selection_id made on the same node; nothing else may be given.
	SelectionID ID      `json:"selection_id,omitempty"`
	WorkerID    *uint64 `json:"worker_id,omitempty"`
	DPRank      uint32  `json:"dp_rank,omitempty"`
	Prompt
	// EffectivePrefillTokens, when given, is booked as prefill load as
	// it is (at most isl_tokens); when absent the node computes it from
	// its own index, as /select would.
	EffectivePrefillTokens *int64 `json:"effective_prefill_tokens,omitempty"`
}

// Reservation answers POST /reservations.
type Reservation struct {
	ReservationID          string `json:"reservation_id"`
	SelectionID            string `json:"selection_id,omitempty"`
	ModelName              string `json:"model_name"`
	TenantID               string `json:"tenant_id"`
	WorkerID               uint64 `json:"worker_id"`
	DPRank                 uint32 `json:"dp_rank"`
	EffectivePrefillTokens int64  `json:"effective_prefill_tokens"`
}

// OutputBlockRequest is the optional body of
// POST /reservations/{id}/output_block.
type OutputBlockRequest struct {
	// DecayFraction, in [0, 1], makes the request's unshared blocks and
	// all its output blocks weigh this fraction from now on.
	DecayFraction *float64 `json:"decay_fraction,omitempty"`
}

// StatusOK is the status of a ReservationAck.
const StatusOK = "ok"

// ReservationAck answers prefill_complete, output_block and DELETE of a
// reservation.
type ReservationAck struct {
	Status        string `json:"status"`
	ReservationID string `json:"reservation_id"`
}

// Origins of a booking.
const (
	OriginLocal = "local" // booked on the node that answers
	OriginPeer  = "peer"  // mirrored from another node by replica sync
)

// ReservationInfo is a booking as GET /reservations shows it.
type ReservationInfo struct {
	ReservationID string `json:"reservation_id"`
	ModelName     string `json:"model_name"`
	TenantID      string `json:"tenant_id"`
	WorkerID      uint64 `json:"worker_id"`
	DPRank        uint32 `json:"dp_rank"`
	// Blocks is the number of distinct prompt blocks (sequence hashes)
	// the booking holds; ISLTokens its input length.
	Blocks    int   `json:"blocks"`
	ISLTokens int64 `json:"isl_tokens"`
	// PrefillTokens is the prefill load booked; it stops counting once
	// PrefillComplete.
	PrefillTokens   int64 `json:"prefill_tokens"`
	PrefillComplete bool  `json:"prefill_complete"`
	OutputBlocks    int64 `json:"output_blocks"`
	// DecayFraction is the latest output_block decay fraction, if any.
	DecayFraction *float64  `json:"decay_fraction,omitempty"`
	AdmittedAt    time.Time `json:"admitted_at"`
	ExpiresAt     time.Time `json:"expires_at"`
	// Origin is OriginLocal or OriginPeer; OriginNode names the peer.
	Origin     string `json:"origin"`
	OriginNode string `json:"origin_node,omitempty"`
}

// ReservationPage answers GET /reservations: bookings sorted by id, at most
// the limit asked for; NextCursor, when present, fetches the next page.
type ReservationPage struct {
	Reservations []ReservationInfo `json:"reservations"`
	NextCursor   string            `json:"next_cursor,omitempty"`
}

// ReservationsQuery filters GET /reservations; zero values do not filter.
type ReservationsQuery struct {
	ModelName string
	TenantID  string
	WorkerID  *uint64
	Limit     int
	Cursor    string
}
