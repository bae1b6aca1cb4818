package fsm

import "errors"

// Sentinel errors returned in Result.Err. They are deterministic outcomes of
// a command (every node reaches the same one), not failures of the FSM.
var (
	// ErrWorkerNotFound is returned by patch and delete of an unknown id.
	ErrWorkerNotFound = errors.New("worker not found")
	// ErrLeaseRenewed is returned by an ExpireLease of a worker whose
	// record changed (re-registered, patched, lease removed) after the
	// leader judged its lease lapsed: it stays.
	ErrLeaseRenewed = errors.New("lease renewed")
	// ErrNodeNotFound is returned by a delete of unknown node metadata.
	ErrNodeNotFound = errors.New("node not found")
	// ErrClusterIDSet is returned by a SetClusterID naming another id
	// than the one the catalog already holds: the first one stays.
	ErrClusterIDSet = errors.New("cluster id already set")
	// ErrPolicyNotFound is returned by a delete of a policy entry the
	// catalog does not hold.
	ErrPolicyNotFound = errors.New("policy not found")
	// ErrTooManyPolicies is returned by a SetPolicy of a new (model,
	// tenant) when the catalog holds MaxPolicies entries already.
	ErrTooManyPolicies = errors.New("too many policy entries")
	// ErrInvalidCommand is returned when a command's content is invalid
	// (for example a patch that would leave data_parallel_size at 0). The
	// HTTP layer validates first, so this is a second line of defence.
	ErrInvalidCommand = errors.New("invalid command")
)

// ErrUnknownPartition is not a command's outcome but a reading of the
// catalog (Catalog.CheckPartitionKnown): it holds no worker for a (model,
// tenant), and never held one that it remembers, so a request naming it
// is most likely a typo, not an outage.
var ErrUnknownPartition = errors.New("unknown partition")

// FieldError is an invalid value of one field of a command. It reads
// "field: problem" and unwraps to ErrInvalidCommand.
type FieldError struct {
	Field, Problem string
}

func (e *FieldError) Error() string { return e.Field + ": " + e.Problem }
func (e *FieldError) Unwrap() error { return ErrInvalidCommand }
