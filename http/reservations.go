package http

import (
	"net/http"

	"github.com/gorilla/mux"

	"github.com/kvselect/kvselect/scheduler"
)

// reservationInput is the body of POST /reservations.
type reservationInput struct {
	promptInput
	ReservationID          *string `json:"reservation_id"`
	WorkerID               *uint64 `json:"worker_id"`
	DPRank                 *uint32 `json:"dp_rank"`
	EffectivePrefillTokens *int64  `json:"effective_prefill_tokens"`
}

type reservationJSON struct {
	ReservationID          string `json:"reservation_id"`
	ModelName              string `json:"model_name"`
	TenantID               string `json:"tenant_id"`
	WorkerID               uint64 `json:"worker_id"`
	DPRank                 uint32 `json:"dp_rank"`
	EffectivePrefillTokens int64  `json:"effective_prefill_tokens"`
}

func (s *Service) createReservation(w http.ResponseWriter, r *http.Request) error {
	var in reservationInput
	if err := decodeBody(w, r, &in, false); err != nil {
		return err
	}
	if in.ReservationID == nil {
		return badRequest("reservation_id", "required")
	}
	if err := checkReservationID(*in.ReservationID); err != nil {
		return err
	}
	if in.WorkerID == nil {
		return badRequest("worker_id", "required")
	}
	req := scheduler.ReserveRequest{ID: *in.ReservationID, WorkerID: *in.WorkerID,
		EffectivePrefill: in.EffectivePrefillTokens}
	if in.DPRank != nil {
		req.DPRank = *in.DPRank
	}
	var err error
	if req.Partition, err = in.partition(); err != nil {
		return err
	}
	if req.Prompt, err = in.prompt(promptRules{}); err != nil {
		return err
	}
	if ep := in.EffectivePrefillTokens; ep != nil && (*ep < 0 || *ep > req.Prompt.ISL) {
		return badRequest("effective_prefill_tokens", "must be between 0 and isl_tokens (%d), got %d", req.Prompt.ISL, *ep)
	}
	if err := s.waitCatalog(r, in.MinCatalogIndex); err != nil {
		return err
	}
	booked, err := s.cfg.Scheduler.Reserve(req)
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusCreated, reservationJSON{
		ReservationID: req.ID, ModelName: req.Partition.Model, TenantID: req.Partition.Tenant,
		WorkerID: req.WorkerID, DPRank: req.DPRank, EffectivePrefillTokens: booked,
	})
}

type statusJSON struct {
	Status        string `json:"status"`
	ReservationID string `json:"reservation_id"`
}

func (s *Service) prefillComplete(w http.ResponseWriter, r *http.Request) error {
	id := mux.Vars(r)["id"]
	if err := s.cfg.Scheduler.PrefillComplete(id); err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, statusJSON{Status: "ok", ReservationID: id})
}

func (s *Service) outputBlock(w http.ResponseWriter, r *http.Request) error {
	var in struct {
		DecayFraction *float64 `json:"decay_fraction"`
	}
	if err := decodeBody(w, r, &in, true); err != nil {
		return err
	}
	if f := in.DecayFraction; f != nil && !(*f >= 0 && *f <= 1) {
		return badRequest("decay_fraction", "must be between 0 and 1, got %v", *f)
	}
	id := mux.Vars(r)["id"]
	if err := s.cfg.Scheduler.OutputBlock(id, in.DecayFraction); err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, statusJSON{Status: "ok", ReservationID: id})
}

func (s *Service) deleteReservation(w http.ResponseWriter, r *http.Request) error {
	id := mux.Vars(r)["id"]
	if err := s.cfg.Scheduler.Free(id); err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, statusJSON{Status: "ok", ReservationID: id})
}
