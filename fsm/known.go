package fsm

import (
	"fmt"
	"maps"
	"slices"
	"strings"
)

// Known partitions (SPEC §3.3). A selection in a partition without a
// schedulable worker is 503 either way, but the code tells a client
// whether to retry: not_ready when the catalog holds workers for the
// (model, tenant), or held some before (an outage: every worker's lease
// lapsed, a fleet redeploys), unknown_partition when it never did (a
// misspelt model_name or tenant_id, which no retry mends).
//
// "Held before" is history the workers do not tell, so the catalog keeps
// it: the partitions that lost their last worker, with the index at which
// they did (retired). It is part of the replicated state, derived by apply
// alike on every node and carried in snapshots, so every node answers a
// request with the same code. It is bounded: past MaxRetiredPartitions the
// partition emptied longest ago is forgotten first (and then reads as
// unknown, as one emptied before a snapshot of a release without this
// record does).

// MaxRetiredPartitions bounds the emptied partitions the catalog
// remembers.
const MaxRetiredPartitions = 4096

// MaxListedPartitions bounds the partitions an ErrUnknownPartition
// message lists.
const MaxListedPartitions = 10

// retire records that k lost its last worker at the editor's index.
func (e *editor) retire(k PartitionKey) {
	e.copyRetired()
	e.next.retired[k] = e.next.index
	if len(e.next.retired) <= MaxRetiredPartitions {
		return
	}
	oldest := k
	for r, at := range e.next.retired {
		if o := e.next.retired[oldest]; at < o || at == o && comparePartitionKeys(r, oldest) < 0 {
			oldest = r
		}
	}
	delete(e.next.retired, oldest)
}

// unretire forgets that k was emptied: it holds workers again.
func (e *editor) unretire(k PartitionKey) {
	if _, ok := e.next.retired[k]; ok {
		e.copyRetired()
		delete(e.next.retired, k)
	}
}

func (e *editor) copyRetired() { ownMap(&e.next.retired, &e.retiredCopied) }

// CheckPartitionKnown returns nil when the catalog holds a worker for k,
// or held one before (Retired); otherwise an error wrapping
// ErrUnknownPartition whose message names k and lists the partitions the
// catalog holds (at most MaxListedPartitions, sorted, with their count).
//
// Before the catalog rules switched the retired record on (rules.go), no
// partition is claimed unknown: the catalog cannot tell a typo from a
// partition emptied, so it answers as the release before did (not_ready).
func (c *Catalog) CheckPartitionKnown(k PartitionKey) error {
	if _, ok := c.partitions[k]; ok || !c.stickyRules() {
		return nil
	}
	if _, ok := c.retired[k]; ok {
		return nil
	}
	keys := slices.SortedFunc(maps.Keys(c.partitions), comparePartitionKeys)
	var b strings.Builder
	fmt.Fprintf(&b, "%v: no worker was ever registered for model_name %q tenant_id %q", ErrUnknownPartition, k.Model, k.Tenant)
	switch len(keys) {
	case 0:
		b.WriteString("; the catalog holds no worker at all")
	default:
		fmt.Fprintf(&b, "; the catalog holds %d partition(s) (model_name/tenant_id): ", len(keys))
		for i, key := range keys[:min(len(keys), MaxListedPartitions)] {
			if i > 0 {
				b.WriteString(", ")
			}
			fmt.Fprintf(&b, "%q/%q", key.Model, key.Tenant)
		}
		if more := len(keys) - MaxListedPartitions; more > 0 {
			fmt.Fprintf(&b, " and %d more (GET /workers lists them)", more)
		}
	}
	return &unknownPartitionError{msg: b.String()}
}

// unknownPartitionError carries CheckPartitionKnown's message, which
// starts with ErrUnknownPartition's, and unwraps to it.
type unknownPartitionError struct{ msg string }

func (e *unknownPartitionError) Error() string { return e.msg }
func (e *unknownPartitionError) Unwrap() error { return ErrUnknownPartition }

// retiredV1 is one emptied partition in a snapshot.
type retiredV1 struct {
	ModelName string `json:"model_name"`
	TenantID  string `json:"tenant_id"`
	Index     uint64 `json:"index"`
}

func encodeRetired(c *Catalog) []retiredV1 {
	keys := slices.SortedFunc(maps.Keys(c.retired), comparePartitionKeys)
	out := make([]retiredV1, 0, len(keys))
	for _, k := range keys {
		out = append(out, retiredV1{ModelName: k.Model, TenantID: k.Tenant, Index: c.retired[k]})
	}
	return out
}
