package fsm

import (
	"fmt"
	"maps"
	"math"
	"slices"
)

// Selection policies as catalog state (SPEC §6.4): which policy, with which
// parameters, each partition's selections run, so that every node ranks
// alike. The FSM stores a policy's name and parameters and checks only
// their shape: it does not know the policies (package scheduler does, and
// imports this one), so the HTTP layer validates a policy before it is
// proposed, and a node that cannot build an entry's policy (a newer name)
// falls back to the default for it and says so.

// AnyModel as a policy's model names the cluster default: the policy of
// every partition without an entry of its own. Its tenant is empty.
const AnyModel = "*"

// Limits on policy entries. The first bounds the catalog: a PUT of a new
// (model, tenant) past it is refused (ErrTooManyPolicies); replacing an
// entry always works.
const (
	MaxPolicies     = 4096
	MaxPolicyParams = 64
)

// Policy is one catalog entry: the policy a partition runs.
type Policy struct {
	// Key is the partition; {AnyModel, ""} is the cluster default.
	Key PartitionKey
	// Name names the policy; Params are its parameters (booleans as 0 or
	// 1). The map is shared by every catalog that holds the entry: never
	// modify it.
	Name   string
	Params map[string]float64
	// ModifyIndex is the Raft index that last wrote the entry.
	ModifyIndex uint64
}

// IsDefault reports whether the entry is the cluster default.
func (p *Policy) IsDefault() bool { return p.Key.Model == AnyModel }

// SetPolicy stores a partition's policy, or the cluster default, replacing
// what the partition had.
type SetPolicy struct {
	Key    PartitionKey
	Name   string
	Params map[string]float64
}

// DeletePolicy removes a partition's policy (or the cluster default): its
// selections fall back to the cluster default, then to the node's.
type DeletePolicy struct {
	Key PartitionKey
}

// InitPolicy seeds the cluster default with the policy of the command line
// (--policy) when the cluster starts: it is written once per cluster, and
// only when no cluster default was ever written (by a seed or an
// operator), so an operator's later DELETE of the default sticks. The node
// that bootstraps the cluster writes it.
type InitPolicy struct {
	Name   string
	Params map[string]float64
}

// The policy commands carry the IgnoreUnknown flag: a binary before
// policies as catalog state skips them and keeps selecting with its own
// --policy, which ranks differently but leaves the catalog it knows
// identical to every other node's.
func (SetPolicy) Type() CommandType    { return CmdSetPolicy | IgnoreUnknown }
func (DeletePolicy) Type() CommandType { return CmdDeletePolicy | IgnoreUnknown }
func (InitPolicy) Type() CommandType   { return CmdInitPolicy | IgnoreUnknown }

// ValidatePolicyKey checks the partition of a policy entry: a model and a
// tenant, or AnyModel with no tenant.
func ValidatePolicyKey(k PartitionKey) error {
	switch {
	case k.Model == "":
		return &FieldError{"model_name", "required"}
	case len(k.Model) > MaxStringLen:
		return &FieldError{"model_name", fmt.Sprintf("longer than %d bytes", MaxStringLen)}
	case k.Model == AnyModel && k.Tenant != "":
		return &FieldError{"tenant_id", fmt.Sprintf("must be empty with model_name %q (the cluster default), got %q", AnyModel, k.Tenant)}
	case k.Model != AnyModel && k.Tenant == "":
		return &FieldError{"tenant_id", "required"}
	case len(k.Tenant) > MaxStringLen:
		return &FieldError{"tenant_id", fmt.Sprintf("longer than %d bytes", MaxStringLen)}
	}
	return nil
}

// ValidatePolicyEntry checks an entry's shape as every policy command and
// snapshot record must have it. Whether the policy exists and takes these
// parameters is the scheduler's to say (scheduler.ValidatePolicy).
func ValidatePolicyEntry(k PartitionKey, name string, params map[string]float64) error {
	if err := ValidatePolicyKey(k); err != nil {
		return err
	}
	if name == "" {
		return &FieldError{"policy", "required"}
	}
	if len(name) > MaxStringLen {
		return &FieldError{"policy", fmt.Sprintf("longer than %d bytes", MaxStringLen)}
	}
	if len(params) > MaxPolicyParams {
		return &FieldError{"parameters", fmt.Sprintf("%d parameters, at most %d", len(params), MaxPolicyParams)}
	}
	for _, n := range slices.Sorted(maps.Keys(params)) {
		switch v := params[n]; {
		case n == "" || len(n) > MaxStringLen:
			return &FieldError{"parameters", fmt.Sprintf("a parameter name must be 1 to %d bytes", MaxStringLen)}
		case math.IsNaN(v) || math.IsInf(v, 0):
			return &FieldError{"parameters." + n, fmt.Sprintf("must be finite, got %v", v)}
		}
	}
	return nil
}

// Policy returns a partition's entry ({AnyModel, ""}: the cluster
// default's).
func (c *Catalog) Policy(k PartitionKey) (Policy, bool) {
	p, ok := c.policies[k]
	return p, ok
}

// Policies returns every entry, sorted by (model, tenant); the cluster
// default sorts as model "*".
func (c *Catalog) Policies() []Policy {
	out := slices.Collect(maps.Values(c.policies))
	slices.SortFunc(out, func(a, b Policy) int { return comparePartitionKeys(a.Key, b.Key) })
	return out
}

// PolicyCount is the number of entries.
func (c *Catalog) PolicyCount() int { return len(c.policies) }

// DefaultPolicySeeded reports whether a cluster default was ever written,
// by InitPolicy or by an operator: from then on InitPolicy changes
// nothing.
func (c *Catalog) DefaultPolicySeeded() bool { return c.policySeeded }

// putPolicy stores an entry as is (restore keeps its ModifyIndex).
func (e *editor) putPolicy(p Policy) {
	e.copyPolicies()
	e.next.policies[p.Key] = p
	if p.IsDefault() {
		e.next.policySeeded = true
	}
}

func (e *editor) deletePolicy(k PartitionKey) {
	e.copyPolicies()
	delete(e.next.policies, k)
}

func (e *editor) copyPolicies() { ownMap(&e.next.policies, &e.policiesCopied) }

func applySetPolicy(e *editor, payload []byte) (outcome, error) {
	v := decodePayload[policyV1](CmdSetPolicy, payload)
	k := PartitionKey{Model: v.ModelName, Tenant: v.TenantID}
	if err := ValidatePolicyEntry(k, v.Policy, v.Parameters); err != nil {
		return outcome{}, err
	}
	if _, ok := e.next.policies[k]; !ok && len(e.next.policies) >= MaxPolicies {
		return outcome{}, fmt.Errorf("%w: the catalog holds %d, at most %d; delete one first", ErrTooManyPolicies,
			len(e.next.policies), MaxPolicies)
	}
	e.putPolicy(Policy{Key: k, Name: v.Policy, Params: v.Parameters, ModifyIndex: e.next.index})
	return outcome{policy: &k}, nil
}

func applyDeletePolicy(e *editor, payload []byte) (outcome, error) {
	v := decodePayload[policyV1](CmdDeletePolicy, payload)
	k := PartitionKey{Model: v.ModelName, Tenant: v.TenantID}
	if err := ValidatePolicyKey(k); err != nil {
		return outcome{}, err
	}
	old, ok := e.next.policies[k]
	if !ok {
		return outcome{}, fmt.Errorf("%w: model_name %q tenant_id %q", ErrPolicyNotFound, k.Model, k.Tenant)
	}
	e.deletePolicy(k)
	return outcome{removedPolicy: &old}, nil
}

func applyInitPolicy(e *editor, payload []byte) (outcome, error) {
	v := decodePayload[policyV1](CmdInitPolicy, payload)
	k := PartitionKey{Model: AnyModel}
	if err := ValidatePolicyEntry(k, v.Policy, v.Parameters); err != nil {
		return outcome{}, err
	}
	if !e.next.policySeeded {
		// Not refused at MaxPolicies: a seed comes first in a fresh
		// cluster, and it is one entry.
		e.putPolicy(Policy{Key: k, Name: v.Policy, Params: v.Parameters, ModifyIndex: e.next.index})
	}
	return outcome{policy: &k}, nil
}
