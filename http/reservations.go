package http

import (
	"encoding/base64"
	"net/http"
	"strconv"

	"github.com/gorilla/mux"

	"github.com/kvselect/kvselect/api"
	"github.com/kvselect/kvselect/scheduler"
)

func (s *Service) createReservation(w http.ResponseWriter, r *http.Request) error {
	var in api.ReserveRequest
	if err := decodeBody(w, r, &in, false); err != nil {
		return err
	}
	if in.ReservationID == "" {
		return badRequest("reservation_id", "required")
	}
	req := scheduler.ReserveRequest{ID: string(in.ReservationID)}
	if in.SelectionID != "" {
		if in.WorkerID != nil || in.DPRank != 0 || in.EffectivePrefillTokens != nil || promptGiven(&in.Prompt) {
			return badRequest("selection_id", "books the choice /select remembered under it; give no worker, rank or prompt with it")
		}
		req.SelectionID = string(in.SelectionID)
	} else {
		if in.WorkerID == nil {
			return badRequest("worker_id", "required (or give the selection_id of a /select)")
		}
		req.WorkerID, req.DPRank, req.EffectivePrefill = *in.WorkerID, in.DPRank, in.EffectivePrefillTokens
		var err error
		if req.Partition, err = partitionOf(&in.Prompt); err != nil {
			return err
		}
		if req.Prompt, err = promptOf(&in.Prompt, false); err != nil {
			return err
		}
		if ep := in.EffectivePrefillTokens; ep != nil && (*ep < 0 || *ep > req.Prompt.ISL) {
			return badRequest("effective_prefill_tokens", "must be between 0 and isl_tokens (%d), got %d", req.Prompt.ISL, *ep)
		}
	}
	if err := s.waitSelectionCatalog(w, r, &in.Prompt); err != nil {
		return err
	}
	b, err := s.cfg.Selector.Reserve(req)
	if err != nil && req.SelectionID == "" {
		return s.partitionErr(r.Context(), req.Partition, promptIndex(r, &in.Prompt), err)
	} else if err != nil {
		return err
	}
	return writeJSON(w, http.StatusCreated, api.Reservation{
		ReservationID: req.ID, SelectionID: string(in.SelectionID), ModelName: b.Partition.Model, TenantID: b.Partition.Tenant,
		WorkerID: b.WorkerID, DPRank: b.DPRank, EffectivePrefillTokens: b.PrefillTokens,
	})
}

// promptGiven reports whether any field of the prompt but
// min_catalog_index is set.
func promptGiven(p *api.Prompt) bool {
	return p.ModelName != "" || p.TenantID != "" || p.RoutingGroup != "" || p.BlockHashes != nil ||
		p.SequenceHashes != nil || p.ISLTokens != 0 || p.TokenIDs != nil || p.LoraName != ""
}

// pathReservationID is the {id} of a reservation route.
func pathReservationID(r *http.Request) (string, error) {
	id := mux.Vars(r)["id"]
	return id, checkID("reservation_id", id)
}

// lifecycle runs one lifecycle step on the reservation of the path.
func (s *Service) lifecycle(w http.ResponseWriter, r *http.Request, step func(id string) error) error {
	id, err := pathReservationID(r)
	if err != nil {
		return err
	}
	if err := step(id); err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, api.ReservationAck{Status: api.StatusOK, ReservationID: id})
}

// prefillComplete takes no body fields: an empty body or {} is fine, any
// field is refused (400 naming it), like every unknown field (SPEC §3).
func (s *Service) prefillComplete(w http.ResponseWriter, r *http.Request) error {
	if err := decodeBody(w, r, &struct{}{}, true); err != nil {
		return err
	}
	return s.lifecycle(w, r, s.cfg.Selector.PrefillComplete)
}

func (s *Service) outputBlock(w http.ResponseWriter, r *http.Request) error {
	var in api.OutputBlockRequest
	if err := decodeBody(w, r, &in, true); err != nil {
		return err
	}
	if f := in.DecayFraction; f != nil && !(*f >= 0 && *f <= 1) {
		return badRequest("decay_fraction", "must be between 0 and 1, got %v", *f)
	}
	return s.lifecycle(w, r, func(id string) error { return s.cfg.Selector.OutputBlock(id, in.DecayFraction) })
}

func (s *Service) deleteReservation(w http.ResponseWriter, r *http.Request) error {
	return s.lifecycle(w, r, s.cfg.Selector.Free)
}

func (s *Service) getReservation(w http.ResponseWriter, r *http.Request) error {
	id, err := pathReservationID(r)
	if err != nil {
		return err
	}
	info, err := s.cfg.Loads.Reservation(id)
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, reservationView(info))
}

// listReservations pages through the bookings by id. The cursor is the
// last id of the previous page, encoded so that clients treat it as opaque.
func (s *Service) listReservations(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	model, tenant, err := queryPartition(r)
	if err != nil {
		return err
	}
	f := scheduler.ReservationFilter{Model: model, Tenant: tenant, Limit: api.DefaultReservationsLimit}
	if v := q.Get(api.QueryWorkerID); v != "" {
		id, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			return badRequest(api.QueryWorkerID, "%q is not an unsigned 64-bit integer", v)
		}
		f.WorkerID = &id
	}
	if v := q.Get(api.QueryLimit); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > api.MaxReservationsLimit {
			return badRequest(api.QueryLimit, "must be an integer from 1 to %d, got %q", api.MaxReservationsLimit, v)
		}
		f.Limit = n
	}
	if v := q.Get(api.QueryCursor); v != "" {
		after, err := base64.RawURLEncoding.DecodeString(v)
		if err != nil || api.ValidateID(string(after)) != nil {
			return badRequest(api.QueryCursor, "%q is not a cursor this API gave", v)
		}
		f.After = string(after)
	}
	infos, more := s.cfg.Loads.Reservations(f)
	page := api.ReservationPage{Reservations: make([]api.ReservationInfo, len(infos))}
	for i, info := range infos {
		page.Reservations[i] = reservationView(info)
	}
	if more {
		page.NextCursor = base64.RawURLEncoding.EncodeToString([]byte(infos[len(infos)-1].ID))
	}
	return writeJSON(w, http.StatusOK, page)
}

func reservationView(r scheduler.ReservationInfo) api.ReservationInfo {
	v := api.ReservationInfo{
		ReservationID: r.ID, ModelName: r.Partition.Model, TenantID: r.Partition.Tenant,
		WorkerID: r.WorkerID, DPRank: r.DPRank, Blocks: r.Blocks, ISLTokens: r.ISL,
		PrefillTokens: r.PrefillTokens, PrefillComplete: r.PrefillComplete, OutputBlocks: r.OutputBlocks,
		DecayFraction: r.DecayFraction, AdmittedAt: r.Admitted.UTC(), ExpiresAt: r.Expires.UTC(),
		Origin: api.OriginLocal,
	}
	if r.OriginNode != "" {
		v.Origin, v.OriginNode = api.OriginPeer, r.OriginNode
	}
	return v
}
