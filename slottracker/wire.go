package slottracker

import (
	"errors"
	"strings"

	"github.com/kvselect/kvselect/api"
	"github.com/kvselect/kvselect/fsm"
)

// Request bodies (seed 003). Required fields are pointers, or nil-able
// slices, so that an absent field is told from a zero one; decodeRequest
// refuses unknown fields and checks presence, the Service checks values.

// Every body names its tracker with model_name and tenant_id. They are
// spelt out in each type rather than embedded: encoding/json names an
// embedded struct's fields with the struct's name in its errors.

// keyOf is the tracker key of a body whose model_name is present.
func keyOf(model *string, tenant string) fsm.PartitionKey {
	return fsm.PartitionKey{Model: *model, Tenant: tenant}
}

type registerRequest struct {
	ModelName *string `json:"model_name"`
	TenantID  string  `json:"tenant_id"`
	WorkerID  *uint64 `json:"worker_id"`
	BlockSize *uint32 `json:"block_size"`
	DPStart   *uint32 `json:"dp_start"`
	DPSize    *uint32 `json:"dp_size"`
}

type unregisterRequest struct {
	ModelName *string `json:"model_name"`
	TenantID  string  `json:"tenant_id"`
	WorkerID  *uint64 `json:"worker_id"`
}

type addRequest struct {
	ModelName      *string    `json:"model_name"`
	TenantID       string     `json:"tenant_id"`
	RequestID      *string    `json:"request_id"`
	WorkerID       *uint64    `json:"worker_id"`
	DPRank         *uint32    `json:"dp_rank"`
	SequenceHashes api.Hashes `json:"sequence_hashes"`
	NewISLTokens   int64      `json:"new_isl_tokens"`
}

type lifecycleRequest struct {
	ModelName *string `json:"model_name"`
	TenantID  string  `json:"tenant_id"`
	RequestID *string `json:"request_id"`
}

type potentialLoadsRequest struct {
	ModelName      *string    `json:"model_name"`
	TenantID       string     `json:"tenant_id"`
	SequenceHashes api.Hashes `json:"sequence_hashes"`
	NewISLTokens   int64      `json:"new_isl_tokens"`
}

// request is a decoded body that can say which required field it lacks.
type request interface {
	missing() string
}

// field is one required field and whether the body had it.
type field struct {
	name    string
	present bool
}

func firstMissing(fields ...field) string {
	for _, f := range fields {
		if !f.present {
			return f.name
		}
	}
	return ""
}

func (r *registerRequest) missing() string {
	return firstMissing(field{"worker_id", r.WorkerID != nil}, field{"model_name", r.ModelName != nil},
		field{"block_size", r.BlockSize != nil}, field{"dp_start", r.DPStart != nil}, field{"dp_size", r.DPSize != nil})
}

func (r *unregisterRequest) missing() string {
	return firstMissing(field{"worker_id", r.WorkerID != nil}, field{"model_name", r.ModelName != nil})
}

func (r *addRequest) missing() string {
	return firstMissing(field{"model_name", r.ModelName != nil}, field{"request_id", r.RequestID != nil},
		field{"worker_id", r.WorkerID != nil}, field{"dp_rank", r.DPRank != nil},
		field{"sequence_hashes", r.SequenceHashes != nil})
}

func (r *lifecycleRequest) missing() string {
	return firstMissing(field{"model_name", r.ModelName != nil}, field{"request_id", r.RequestID != nil})
}

func (r *potentialLoadsRequest) missing() string {
	return firstMissing(field{"model_name", r.ModelName != nil}, field{"sequence_hashes", r.SequenceHashes != nil})
}

// decodeRequest decodes one JSON object strictly into v (api.Decode:
// unknown fields, trailing data and non-objects are refused; hashes may be
// signed or unsigned 64-bit integers) and checks that the required fields
// are there. Every failure is a *FieldError naming the field.
func decodeRequest(body []byte, v request) error {
	if err := api.Decode(body, v); err != nil {
		var fe *api.FieldError
		if !errors.As(err, &fe) {
			return &FieldError{Problem: err.Error()}
		}
		problem := fe.Problem
		if strings.HasPrefix(problem, "unknown field") {
			// api's wording points at the main API's OpenAPI document,
			// which this server does not serve.
			problem = "unknown field"
		}
		return &FieldError{Field: fe.Field, Problem: problem}
	}
	if name := v.missing(); name != "" {
		return invalid(name, "required")
	}
	return nil
}
