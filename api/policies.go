package api

// Selection policies as catalog state (SPEC §6.4): which policy each
// partition's selections run, through the Raft log like worker writes, so
// every node ranks alike.

// AnyModel as a policy's model_name makes it the cluster default: the
// policy of every partition without an entry of its own. Its tenant_id is
// empty.
const AnyModel = "*"

// Limits of the policy entries (SPEC §11).
const (
	// MaxPolicies bounds the catalog's entries, the cluster default
	// included: a PUT of a new (model_name, tenant_id) past it is 409
	// conflict; replacing an entry always works.
	MaxPolicies = 4096
	// MaxPolicyParameters bounds the parameters of one entry (400 past
	// it); no policy takes nearly as many.
	MaxPolicyParameters = 64
)

// PolicyParameters are a policy's parameters by name, each a JSON number,
// or a JSON boolean for a parameter of that kind (a number for a boolean,
// or the reverse, is 400 naming it). Decoded values are float64 or bool.
type PolicyParameters map[string]any

// PolicyRequest is the body of PUT /policies: the policy of one partition
// or, with model_name "*" and no tenant, the cluster default.
type PolicyRequest struct {
	ModelName string `json:"model_name,omitempty"`
	TenantID  string `json:"tenant_id,omitempty"`
	// RoutingGroup is Dynamo's newer name for tenant_id; give one or the
	// other (or both, equal).
	RoutingGroup string           `json:"routing_group,omitempty"`
	Policy       string           `json:"policy"`
	Parameters   PolicyParameters `json:"parameters,omitempty"`
}

// Policy is one policy entry of the catalog.
type Policy struct {
	ModelName string `json:"model_name"`
	// TenantID is empty for the cluster default.
	TenantID string `json:"tenant_id"`
	// Name names the policy.
	Name       string           `json:"policy"`
	Parameters PolicyParameters `json:"parameters"`
	// ModifyIndex is the Raft index that last wrote the entry.
	ModifyIndex uint64 `json:"modify_index"`
}

// PolicyWritten answers PUT and DELETE /policies: the entry stored (the
// removed one for DELETE) and the Raft index the write was applied at.
type PolicyWritten struct {
	Policy
	CatalogIndex uint64 `json:"catalog_index"`
}

// PolicySpec is a policy with its parameters, outside the catalog.
type PolicySpec struct {
	Name       string           `json:"policy"`
	Parameters PolicyParameters `json:"parameters"`
}

// Policies answers GET /policies: every entry, sorted by (model_name,
// tenant_id) as bytes (the cluster default, "*", before every model whose
// name starts with a letter or a digit), and the answering node's own
// default.
type Policies struct {
	Policies []Policy `json:"policies"`
	// NodeDefault is the answering node's --policy: what a partition
	// runs on that node when neither it nor the cluster has an entry.
	NodeDefault PolicySpec `json:"node_default"`
}
