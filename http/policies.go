package http

import (
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"

	"github.com/kvselect/kvselect/api"
	"github.com/kvselect/kvselect/fsm"
	"github.com/kvselect/kvselect/scheduler"
)

// Selection policies as catalog state (SPEC §6.4): writes go through the
// leader like worker writes, reads are served by any node. The policy and
// its parameters are checked here, against the scheduler's registry,
// before they are proposed: the FSM knows only their shape.

func (s *Service) setPolicy(w http.ResponseWriter, r *http.Request) error {
	var in api.PolicyRequest
	if err := decodeBody(w, r, &in, false); err != nil {
		return err
	}
	key, err := policyKey(in.ModelName, in.TenantID, in.RoutingGroup)
	if err != nil {
		return err
	}
	spec, err := policySpec(in.Policy, in.Parameters)
	if err != nil {
		return err
	}
	if err := fsm.ValidatePolicyEntry(key, spec.Name, spec.Params); err != nil {
		return err
	}
	// The FSM holds the bound; checking the local catalog first keeps a
	// refused entry out of the log in the common case.
	if c := s.cfg.Catalog.Catalog(); c.PolicyCount() >= fsm.MaxPolicies {
		if _, ok := c.Policy(key); !ok {
			return fmt.Errorf("%w: the catalog holds %d, at most %d; delete one first", fsm.ErrTooManyPolicies,
				c.PolicyCount(), fsm.MaxPolicies)
		}
	}
	res, err := s.cfg.Writer.Apply(r.Context(), fsm.SetPolicy{Key: key, Name: spec.Name, Params: spec.Params})
	if err != nil {
		return err
	}
	return policyWritten(w, res)
}

func (s *Service) deletePolicy(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	key, err := policyKey(q.Get(api.QueryModelName), q.Get(api.QueryTenantID), q.Get(api.QueryRoutingGroup))
	if err != nil {
		return err
	}
	res, err := s.cfg.Writer.Apply(r.Context(), fsm.DeletePolicy{Key: key})
	if err != nil {
		return err
	}
	return policyWritten(w, res)
}

func (s *Service) listPolicies(w http.ResponseWriter, r *http.Request) error {
	c, err := s.catalog(r)
	if err != nil {
		return err
	}
	node := s.cfg.NodePolicy
	if node.Name == "" {
		node.Name = scheduler.DefaultPolicy
	}
	out := api.Policies{Policies: make([]api.Policy, 0, c.PolicyCount()),
		NodeDefault: api.PolicySpec{Name: node.Name, Parameters: parametersView(node.Name, node.Params)}}
	for _, p := range c.Policies() {
		out.Policies = append(out.Policies, policyView(p))
	}
	setIndex(w, c.Index())
	return writeJSON(w, http.StatusOK, out)
}

// policyWritten answers a policy write with the entry (stored, or
// removed) and the index the write was applied at.
func policyWritten(w http.ResponseWriter, res *fsm.Result) error {
	setIndex(w, res.Index)
	out := api.PolicyWritten{CatalogIndex: res.Index}
	if res.Policy != nil {
		out.Policy = policyView(*res.Policy)
	}
	return writeJSON(w, http.StatusOK, out)
}

// policyKey is the partition a policy request names: model_name is
// required ("*" for the cluster default, which takes no tenant); tenant_id
// (or routing_group) defaults to "default" for a model. A missing model is
// refused rather than defaulted: whoever leaves it out more likely means
// the cluster default than the model named "default".
func policyKey(model, tenant, group string) (fsm.PartitionKey, error) {
	if model == "" {
		return fsm.PartitionKey{}, badRequest(api.QueryModelName, "required: a model, or %q for the cluster default", api.AnyModel)
	}
	tenant, err := tenantOf(tenant, group)
	if err != nil {
		return fsm.PartitionKey{}, err
	}
	if tenant == "" && model != api.AnyModel {
		tenant = fsm.DefaultScope
	}
	k := fsm.PartitionKey{Model: model, Tenant: tenant}
	return k, fsm.ValidatePolicyKey(k)
}

// policySpec checks a policy and its wire parameters against the
// scheduler's registry: a known policy, known parameters, each a JSON
// number or boolean as its kind says, values in range. Each failure is a
// 400 that names the field, with ValidatePolicy's words.
func policySpec(name string, in api.PolicyParameters) (scheduler.PolicySpec, error) {
	spec := scheduler.PolicySpec{Name: name}
	if name == "" {
		return spec, badRequest("policy", "required: one of %s", strings.Join(scheduler.PolicyNames(), ", "))
	}
	known, _, ok := scheduler.PolicyParams(name)
	if !ok {
		return spec, policyError("policy", scheduler.ValidatePolicy(spec))
	}
	if len(in) > api.MaxPolicyParameters {
		return spec, badRequest("parameters", "%d parameters, at most %d", len(in), api.MaxPolicyParameters)
	}
	if len(in) > 0 {
		spec.Params = make(map[string]float64, len(in))
	}
	for _, k := range slices.Sorted(maps.Keys(in)) {
		field := "parameters." + k
		one := scheduler.PolicySpec{Name: name, Params: map[string]float64{k: 0}}
		i := slices.IndexFunc(known, func(p scheduler.Param) bool { return p.Name == k })
		if i < 0 {
			return spec, policyError(field, scheduler.ValidatePolicy(one))
		}
		v, err := paramValue(known[i], in[k])
		if err != nil {
			return spec, badRequest(field, "%s", err)
		}
		one.Params[k] = v
		if err := scheduler.ValidatePolicy(one); err != nil {
			return spec, policyError(field, err)
		}
		spec.Params[k] = v
	}
	return spec, nil
}

// paramValue is a wire parameter's value as the scheduler takes it
// (booleans as 0 or 1), when its JSON type is the parameter's kind.
func paramValue(p scheduler.Param, v any) (float64, error) {
	want := "a number"
	if p.Kind == scheduler.ParamBool {
		want = "true or false"
	}
	switch v := v.(type) {
	case bool:
		if p.Kind == scheduler.ParamBool {
			if v {
				return 1, nil
			}
			return 0, nil
		}
		return 0, fmt.Errorf("expected %s, got the boolean %v", want, v)
	case float64:
		if p.Kind == scheduler.ParamNumber {
			return v, nil
		}
		return 0, fmt.Errorf("expected %s, got the number %v", want, v)
	case string:
		return 0, fmt.Errorf("expected %s, got a string", want)
	case nil:
		return 0, fmt.Errorf("expected %s, got null", want)
	}
	return 0, fmt.Errorf("expected %s, got %T", want, v)
}

// policyError is a ValidatePolicy failure as a 400 naming field; the
// message already names the policy or parameter.
func policyError(field string, err error) error {
	return badRequest(field, "%s", strings.TrimPrefix(err.Error(), scheduler.ErrInvalid.Error()+": "))
}

func policyView(p fsm.Policy) api.Policy {
	return api.Policy{ModelName: p.Key.Model, TenantID: p.Key.Tenant, Name: p.Name,
		Parameters: parametersView(p.Name, p.Params), ModifyIndex: p.ModifyIndex}
}

// parametersView renders stored parameters as the wire has them: a
// boolean parameter as true or false, the others (and every parameter of
// a policy this build does not know) as numbers.
func parametersView(name string, params map[string]float64) api.PolicyParameters {
	known, _, _ := scheduler.PolicyParams(name)
	out := make(api.PolicyParameters, len(params))
	for k, v := range params {
		out[k] = v
		if i := slices.IndexFunc(known, func(p scheduler.Param) bool { return p.Name == k }); i >= 0 && known[i].Kind == scheduler.ParamBool {
			out[k] = v != 0
		}
	}
	return out
}
