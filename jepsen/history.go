package jepsen

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"slices"
	"sync"
	"time"
)

// Op kinds of the catalog workload, checked for linearizability.
const (
	KindRegister = "register"
	KindPatch    = "patch"
	KindDelete   = "delete"
	KindGet      = "get"
)

// Op kinds of the busy thresholds (model "default"), checked for
// linearizability with the catalog ops: thresholds are catalog state.
const (
	KindThresholdSet   = "threshold_set"
	KindThresholdClear = "threshold_clear"
	KindThresholdGet   = "threshold_get"
)

// Op kinds of the selection workload, checked for availability.
const (
	KindSelectAndReserve = "select_and_reserve"
	KindPrefillComplete  = "prefill_complete"
	KindFree             = "free"
)

// Op kinds of the threshold client's load: holds (select_and_reserve on
// one node until every rank is over the tight threshold), their frees,
// and the probe that must then answer busy.
const (
	KindHold      = "hold"
	KindHoldFree  = "hold_free"
	KindBusyProbe = "busy_probe"
)

// Op kinds of the lease clients (CheckLeases): a registration with
// lease_ttl_s, a keepalive, and a linearizable read of a worker left to
// lapse.
const (
	KindLeaseRegister = "lease_register"
	KindKeepAlive     = "keepalive"
	KindLeaseGet      = "lease_get"
)

// Results of an operation. ResultFail is kept for answers that prove
// nothing was written; anything the client cannot judge is ResultUnknown.
const (
	ResultOK      = "ok"
	ResultFail    = "fail"
	ResultUnknown = "unknown"
)

// Op is one operation of a run, as a client saw it. Call and Return are
// durations since the run's base time, read from the monotonic clock, so
// that ops of all clients are ordered on one time line.
type Op struct {
	// Client is the logical process that ran the op. A catalog client
	// takes a new Client after an unknown outcome, so that no process ever
	// has two ops open at once (the unknown one never returns).
	Client int `json:"client"`
	// Node is the index of the node (in the urls given to the workload)
	// the op was sent to.
	Node     int    `json:"node"`
	Kind     string `json:"kind"`
	WorkerID uint64 `json:"worker_id,omitempty"`
	// Value is the endpoint a register or patch writes, or the
	// thresholds a threshold_set writes (ThresholdValue).
	Value string `json:"value,omitempty"`
	// Output is the endpoint a get read, a patch left or a delete
	// removed, or the thresholds a threshold op answered.
	Output string `json:"output,omitempty"`
	// Body is the answer of an ok catalog op as the client decoded it
	// (JSON): the catalog model checks all of it, not just Output.
	Body string `json:"body,omitempty"`
	// NotFound: the node answered 404 (get, patch or delete of an absent
	// worker; free or prefill_complete of an unknown booking). For catalog
	// ops it is an ok outcome the model checks.
	NotFound bool `json:"not_found,omitempty"`
	// ReservationID names the booking of a selection op.
	ReservationID string `json:"reservation_id,omitempty"`
	// Selected is the worker a select_and_reserve chose, Rank its rank.
	Selected uint64 `json:"selected,omitempty"`
	Rank     uint32 `json:"rank,omitempty"`
	// Busy: a select_and_reserve, hold or probe answered 503 with load
	// shedding's body (seed 001). Its Result is ok: an expected answer.
	Busy bool `json:"busy,omitempty"`
	// NotApplied: a write answered before the node it went through had
	// applied it (X-Kvselect-Applied: false).
	NotApplied bool          `json:"not_applied,omitempty"`
	Call       time.Duration `json:"call"`
	Return     time.Duration `json:"return"`
	Result     string        `json:"result"`
	Error      string        `json:"error,omitempty"`
}

// IsCatalog reports whether the op belongs to the catalog workload's
// worker ops.
func (o Op) IsCatalog() bool {
	switch o.Kind {
	case KindRegister, KindPatch, KindDelete, KindGet:
		return true
	}
	return false
}

// IsThreshold reports whether the op reads or writes the busy thresholds.
func (o Op) IsThreshold() bool {
	switch o.Kind {
	case KindThresholdSet, KindThresholdClear, KindThresholdGet:
		return true
	}
	return false
}

// IsLinearizable reports whether the catalog model checks the op: worker
// and threshold ops.
func (o Op) IsLinearizable() bool { return o.IsCatalog() || o.IsThreshold() }

// IsWrite reports whether the op may change the catalog.
func (o Op) IsWrite() bool {
	switch o.Kind {
	case KindRegister, KindPatch, KindDelete, KindThresholdSet, KindThresholdClear:
		return true
	}
	return false
}

// History records the ops of a run; it is safe for concurrent use.
type History struct {
	mu  sync.Mutex
	ops []Op
}

// NewHistory returns an empty history.
func NewHistory() *History { return &History{} }

// Add records a completed op.
func (h *History) Add(op Op) {
	h.mu.Lock()
	h.ops = append(h.ops, op)
	h.mu.Unlock()
}

// Ops returns a copy of the recorded ops, sorted by call time.
func (h *History) Ops() []Op {
	h.mu.Lock()
	ops := slices.Clone(h.ops)
	h.mu.Unlock()
	SortOps(ops)
	return ops
}

// SortOps orders ops by call time, then client, so that a history reads
// the same however its ops were recorded.
func SortOps(ops []Op) {
	slices.SortStableFunc(ops, func(a, b Op) int {
		if a.Call != b.Call {
			return cmpDuration(a.Call, b.Call)
		}
		return a.Client - b.Client
	})
}

func cmpDuration(a, b time.Duration) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// WriteJSONL writes one op per line.
func WriteJSONL(w io.Writer, ops []Op) error {
	bw := bufio.NewWriter(w)
	enc := json.NewEncoder(bw)
	for _, op := range ops {
		if err := enc.Encode(op); err != nil {
			return err
		}
	}
	return bw.Flush()
}

// ReadJSONL reads what WriteJSONL wrote; blank lines are skipped.
func ReadJSONL(r io.Reader) ([]Op, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 16<<20)
	var ops []Op
	for line := 1; sc.Scan(); line++ {
		b := sc.Bytes()
		if len(b) == 0 {
			continue
		}
		var op Op
		if err := json.Unmarshal(b, &op); err != nil {
			return nil, fmt.Errorf("history line %d: %w", line, err)
		}
		ops = append(ops, op)
	}
	return ops, sc.Err()
}

// ReadHistoryFile reads a history.jsonl, so that the checkers can be run
// again on a saved run.
func ReadHistoryFile(path string) ([]Op, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return ReadJSONL(f)
}
