package scheduler

import (
	"fmt"
	"maps"
	"math"
	mrand "math/rand/v2"
	"slices"
	"strings"

	"github.com/kvselect/kvselect/fsm"
)

// Selection policies (SPEC §6.4). The scheduler keeps eligibility
// (schedulable, not stale, not busy), accounting, booking and replica
// sync; a policy only ranks the eligible candidates and picks one. A
// policy is therefore one small value implementing Policy, registered by
// name with the parameters it takes (policies.go), and every registered
// policy passes the same tests (policy_test.go).

// Candidate is what a policy sees of one eligible rank for one request.
// Every load figure is this node's view (its own bookings and those replica
// sync mirrored from the other nodes); overlaps come from the KV index.
type Candidate struct {
	Worker uint64
	Rank   uint32
	// DeviceBlocks is the prompt's cached prefix on the rank's device;
	// HostExt and DiskExt the further blocks found on host, then on disk.
	DeviceBlocks, HostExt, DiskExt uint32
	// CachedTokens is the weighted cached prefix in tokens, capped at the
	// prompt's length (SPEC §6.2 cached_w).
	CachedTokens int64
	// PrefillTokens is the rank's active prefill load P_w (decayed),
	// DecodeBlocks its active decode blocks D_w, NewBlocks the request's
	// blocks not already active on it A_w, Requests its active requests.
	PrefillTokens int64
	DecodeBlocks  float64
	NewBlocks     float64
	Requests      int
	// TokensPerSecond is the rank's prefill throughput as learned from
	// booking-to-prefill_complete timings (ttft.go).
	TokensPerSecond float64
	// Cost is the policy's figure for the rank, lower is better; a
	// policy that scores writes it, and /explain shows it.
	Cost float64

	rank *rankLoad
	// lower is the host and disk blocks' credit, by the node's weights;
	// cachedRaw is SPEC §6.2's cached_w, not capped at the prompt's length
	// (a hash-form prompt may give fewer tokens than its blocks hold).
	lower     float64
	cachedRaw int64
	// potential loads for /potential_loads
	potentialPrefill int64
	potentialDecode  float64
}

// lowerCredit is the credit, in blocks, of the prefix found on host and
// disk past the device prefix (SPEC §6.2's 0.75·host + 0.25·disk).
func (c *Candidate) lowerCredit() float64 { return c.lower }

// PolicyInput is one request as a policy sees it.
type PolicyInput struct {
	ISL       int64
	Blocks    int
	BlockSize uint32
	// TrackPrefill says whether prefill tokens count as load.
	TrackPrefill bool
	// Rand breaks ties and samples; Turn is the partition's round-robin
	// counter. Both belong to the partition and are used under its lock,
	// which makes a policy's choices deterministic under a seed.
	Rand *mrand.Rand
	Turn *uint64
}

// Policy chooses one of the eligible candidates (never empty) and returns
// its index. It may write each candidate's Cost and must not keep cands.
type Policy interface {
	Choose(in *PolicyInput, cands []Candidate) int
}

// PolicySpec names a policy and the parameters it is given (booleans as 0
// or 1); what the catalog stores for a partition and --policy seeds.
type PolicySpec struct {
	Name   string
	Params map[string]float64
}

func (ps PolicySpec) String() string {
	if len(ps.Params) == 0 {
		return ps.Name
	}
	var b strings.Builder
	b.WriteString(ps.Name)
	for i, k := range slices.Sorted(maps.Keys(ps.Params)) {
		sep := ","
		if i == 0 {
			sep = ":"
		}
		fmt.Fprintf(&b, "%s%s=%v", sep, k, ps.Params[k])
	}
	return b.String()
}

// ParamKind is the type of a policy parameter.
type ParamKind int

const (
	ParamNumber ParamKind = iota
	ParamBool
)

// Param describes one parameter a policy takes.
type Param struct {
	Name    string
	Kind    ParamKind
	Default float64
	// Min and Max bound a number (inclusive); Max 0 means unbounded.
	Min, Max float64
	Doc      string
}

// policyDef is a registered policy: its parameters, and how to build it
// from values for every one of them (defaults filled in).
type policyDef struct {
	name   string
	doc    string
	params []Param
	// preset: fixed values applied over the defaults before the caller's
	// parameters (a named parameter set of another policy).
	preset map[string]float64
	build  func(v paramValues) Policy
}

// paramValues are a policy's parameters after defaults, preset and the
// caller's values.
type paramValues map[string]float64

func (v paramValues) bool(name string) bool { return v[name] != 0 }

// Accounting parameters every policy takes: they change how the request is
// booked and counted, not how candidates are ranked (SPEC §6.2).
var accountingParams = []Param{
	{Name: "track_prefill_tokens", Kind: ParamBool, Default: 1,
		Doc: "count effective prefill tokens as load and in the cost (node default: --track-prefill-tokens)"},
	{Name: "assume_kv_reuse", Kind: ParamBool, Default: 1,
		Doc: "false: sequence hashes derived from token_ids are replaced by random values per block, so in-flight requests never share active blocks"},
}

// DefaultPolicy is the shipped default, used when neither the catalog nor
// --policy names one.
const DefaultPolicy = "dynamo-default"

var policyRegistry = map[string]*policyDef{}

func registerPolicy(d *policyDef) {
	if _, dup := policyRegistry[d.name]; dup {
		panic("scheduler: policy registered twice: " + d.name)
	}
	policyRegistry[d.name] = d
}

// PolicyNames lists the registered policies, sorted.
func PolicyNames() []string { return slices.Sorted(maps.Keys(policyRegistry)) }

// PolicyParams lists the parameters a policy takes (its own, then the
// accounting ones); ok is false for an unknown policy.
func PolicyParams(name string) (params []Param, doc string, ok bool) {
	d := policyRegistry[name]
	if d == nil {
		return nil, "", false
	}
	return append(slices.Clone(d.params), accountingParams...), d.doc, true
}

// resolvedPolicy is a spec checked and built.
type resolvedPolicy struct {
	spec   PolicySpec
	policy Policy
	// set holds the accounting parameters the spec (or its preset) gives;
	// absent ones fall back to the node's settings.
	trackPrefill, assumeKVReuse *bool
	// ignored are a request override's Dynamo cost parameters the policy
	// does not take.
	ignored []string
}

// ValidatePolicy checks a spec: a known policy, known parameters, values in
// range. Its error wraps ErrInvalid and names what is wrong.
func ValidatePolicy(spec PolicySpec) error {
	_, err := resolvePolicy(spec)
	return err
}

func resolvePolicy(spec PolicySpec) (*resolvedPolicy, error) {
	d := policyRegistry[spec.Name]
	if d == nil {
		return nil, fmt.Errorf("%w: unknown policy %q (known: %s)", ErrInvalid, spec.Name, strings.Join(PolicyNames(), ", "))
	}
	v := paramValues{}
	for _, p := range d.params {
		v[p.Name] = p.Default
	}
	maps.Copy(v, d.preset)
	rp := &resolvedPolicy{spec: spec}
	set := func(name string, val float64) {
		b := val != 0
		switch name {
		case "track_prefill_tokens":
			rp.trackPrefill = &b
		case "assume_kv_reuse":
			rp.assumeKVReuse = &b
		}
	}
	for name, val := range d.preset {
		set(name, val)
	}
	for _, name := range slices.Sorted(maps.Keys(spec.Params)) {
		val := spec.Params[name]
		p, ok := findParam(d, name)
		if !ok {
			return nil, fmt.Errorf("%w: policy %q takes no parameter %q (it takes %s)", ErrInvalid, spec.Name, name, paramNames(d))
		}
		if err := p.check(val); err != nil {
			return nil, fmt.Errorf("%w: policy %q parameter %q %v", ErrInvalid, spec.Name, name, err)
		}
		v[name] = val
		set(name, val)
	}
	if d.build != nil {
		rp.policy = d.build(v)
	}
	return rp, nil
}

func findParam(d *policyDef, name string) (Param, bool) {
	for _, ps := range [][]Param{d.params, accountingParams} {
		for _, p := range ps {
			if p.Name == name {
				return p, true
			}
		}
	}
	return Param{}, false
}

func paramNames(d *policyDef) string {
	var names []string
	for _, ps := range [][]Param{d.params, accountingParams} {
		for _, p := range ps {
			names = append(names, p.Name)
		}
	}
	return strings.Join(names, ", ")
}

func (p Param) check(v float64) error {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return fmt.Errorf("must be finite, got %v", v)
	}
	if p.Kind == ParamBool {
		if v != 0 && v != 1 {
			return fmt.Errorf("must be true or false")
		}
		return nil
	}
	if v < p.Min || (p.Max != 0 && v > p.Max) {
		if p.Max != 0 {
			return fmt.Errorf("must be between %v and %v, got %v", p.Min, p.Max, v)
		}
		return fmt.Errorf("must be >= %v, got %v", p.Min, v)
	}
	return nil
}

// Override adjusts one request's scheduling (router_config_override):
// another policy for this request, and parameter values over the policy's.
// Dynamo's cost parameters (dynamoCostParams) are accepted whatever the
// policy, as Dynamo's clients send them with every request: those the
// request's policy does not take are left out and reported (the
// selection's IgnoredOverrides, a response header), never an error. Any
// other parameter the policy does not take is refused.
type Override struct {
	Policy string
	Params map[string]float64
}

func (o *Override) empty() bool { return o.Policy == "" && len(o.Params) == 0 }

// dynamoCostParams are the router_config_override fields Dynamo defines.
var dynamoCostParams = map[string]bool{
	"overlap_score_credit": true, "prefill_load_scale": true, "decode_active_request_weight": true,
	"overlap_score_weight": true, "router_temperature": true,
}

// policyFor returns the policy a request runs: the partition's (the
// catalog's, else the node's default), with the request's override on top.
// An override that names the partition's policy keeps its parameters; one
// that names another starts from that policy's defaults, keeping only the
// partition's accounting settings (they are the partition's, not the
// policy's).
func (s *Scheduler) policyFor(base *resolvedPolicy, o *Override) (*resolvedPolicy, error) {
	if o.empty() {
		return base, nil
	}
	spec := PolicySpec{Name: base.spec.Name, Params: maps.Clone(base.spec.Params)}
	if o.Policy != "" && o.Policy != spec.Name {
		spec = PolicySpec{Name: o.Policy}
		for _, p := range accountingParams {
			if v, ok := base.spec.Params[p.Name]; ok {
				if spec.Params == nil {
					spec.Params = map[string]float64{}
				}
				spec.Params[p.Name] = v
			}
		}
	}
	var ignored []string
	if d := policyRegistry[spec.Name]; d != nil {
		for _, name := range slices.Sorted(maps.Keys(o.Params)) {
			if _, takes := findParam(d, name); !takes && dynamoCostParams[name] {
				ignored = append(ignored, name)
				continue
			}
			if spec.Params == nil {
				spec.Params = make(map[string]float64, len(o.Params))
			}
			spec.Params[name] = o.Params[name]
		}
	}
	rp, err := resolvePolicy(spec)
	if err != nil {
		return nil, err
	}
	rp.ignored = ignored
	return rp, nil
}

// trackPrefill and assumeKVReuse resolve an accounting setting: the
// policy's (request override included) or the node's.
func (s *Scheduler) trackPrefill(rp *resolvedPolicy) bool {
	if rp != nil && rp.trackPrefill != nil {
		return *rp.trackPrefill
	}
	return s.cfg.TrackPrefillTokens
}

func (s *Scheduler) assumeKVReuse(rp *resolvedPolicy) bool {
	if rp != nil && rp.assumeKVReuse != nil {
		return *rp.assumeKVReuse
	}
	return s.cfg.AssumeKVReuse
}

// AnyModel as a policy's model name makes it the cluster default.
const AnyModel = "*"

// policyTable is the catalog's policies, resolved.
type policyTable map[fsm.PartitionKey]*resolvedPolicy

// SetPolicies replaces the catalog's policies: by (model, tenant), with
// model AnyModel (and tenant "") for the cluster default. A spec that does
// not resolve (a policy this build does not know, say) is left out with
// a warning, so its partitions fall back to the cluster or node default.
func (s *Scheduler) SetPolicies(specs map[fsm.PartitionKey]PolicySpec) {
	t := make(policyTable, len(specs))
	for k, spec := range specs {
		rp, err := resolvePolicy(spec)
		if err != nil {
			s.log.Warn("catalog policy not usable here; its partitions use the default", "model", k.Model, "tenant", k.Tenant, "err", err)
			continue
		}
		t[k] = rp
	}
	s.policies.Store(&t)
}

// partitionPolicy is the policy a partition runs: the catalog's for it,
// else the catalog's cluster default, else the node's.
func (s *Scheduler) partitionPolicy(key fsm.PartitionKey) *resolvedPolicy {
	if t := s.policies.Load(); t != nil {
		if rp := (*t)[key]; rp != nil {
			return rp
		}
		if rp := (*t)[fsm.PartitionKey{Model: AnyModel}]; rp != nil {
			return rp
		}
	}
	return s.defaultPolicy
}
