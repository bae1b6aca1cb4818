package http

import (
	"net/http"

	"github.com/kvselect/kvselect/api"
	"github.com/kvselect/kvselect/fsm"
)

// Busy thresholds (load shedding): catalog writes through the leader like
// worker writes, readable on any node.

func (s *Service) setBusyThreshold(w http.ResponseWriter, r *http.Request) error {
	var in api.BusyThresholdRequest
	if err := decodeBody(w, r, &in, false); err != nil {
		return err
	}
	if err := fsm.ValidateThresholds(in.Model, in.ActiveDecodeBlocksThreshold); err != nil {
		return err
	}
	cmd := fsm.SetThresholds{Model: in.Model, ActiveDecodeBlocks: in.ActiveDecodeBlocksThreshold}
	if p := in.ActivePrefillTokensThreshold; p != nil {
		if *p < 0 {
			return badRequest("active_prefill_tokens_threshold", "must be >= 0, got %d", *p)
		}
		tokens := uint64(*p)
		cmd.ActivePrefillTokens = &tokens
	}
	if cmd.ActiveDecodeBlocks == nil && cmd.ActivePrefillTokens == nil {
		// Neither threshold: a read of the model's, as in Dynamo.
		c, err := s.catalog(r)
		if err != nil {
			return err
		}
		t, _ := c.Thresholds(in.Model)
		t.Model = in.Model
		setIndex(w, c.Index())
		return writeJSON(w, http.StatusOK, thresholdView(t))
	}
	return s.writeThresholds(w, r, cmd)
}

func (s *Service) clearBusyThreshold(w http.ResponseWriter, r *http.Request) error {
	model := r.URL.Query().Get(api.QueryModel)
	if err := fsm.ValidateThresholds(model, nil); err != nil {
		return badRequest(api.QueryModel, "%s", err.(*fsm.FieldError).Problem)
	}
	return s.writeThresholds(w, r, fsm.ClearThresholds{Model: model})
}

func (s *Service) writeThresholds(w http.ResponseWriter, r *http.Request, cmd fsm.Command) error {
	res, err := s.cfg.Writer.Apply(r.Context(), cmd)
	if err != nil {
		return err
	}
	setIndex(w, res.Index)
	return writeJSON(w, http.StatusOK, thresholdView(*res.Thresholds))
}

func (s *Service) listBusyThresholds(w http.ResponseWriter, r *http.Request) error {
	c, err := s.catalog(r)
	if err != nil {
		return err
	}
	out := api.BusyThresholds{Thresholds: []api.BusyThreshold{}}
	for _, t := range c.AllThresholds() {
		if t.Set() {
			out.Thresholds = append(out.Thresholds, thresholdView(t))
		}
	}
	setIndex(w, c.Index())
	return writeJSON(w, http.StatusOK, out)
}

func thresholdView(t fsm.Thresholds) api.BusyThreshold {
	return api.BusyThreshold{Model: t.Model, ActiveDecodeBlocksThreshold: t.ActiveDecodeBlocks,
		ActivePrefillTokensThreshold: t.ActivePrefillTokens}
}
