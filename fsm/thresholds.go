package fsm

import (
	"cmp"
	"fmt"
	"maps"
	"math"
	"slices"
)

// Thresholds are one model's busy thresholds (load shedding, seed 001).
// A nil field is not set: that threshold is not checked. A record with
// both fields nil is kept in the catalog all the same: it remembers that
// the model's thresholds were cleared, so the initial values of the
// command line (InitThresholds) are never applied over an operator's
// decision.
type Thresholds struct {
	Model string
	// ActiveDecodeBlocks is a fraction of a rank's total_kv_blocks, in
	// [0, 1]: the rank is busy when its active decode blocks exceed it.
	ActiveDecodeBlocks *float64
	// ActivePrefillTokens is a token count: the rank is busy when its
	// active prefill tokens exceed it.
	ActivePrefillTokens *uint64
	// ModifyIndex is the Raft index that last changed the record.
	ModifyIndex uint64
}

// Set reports whether at least one threshold is set.
func (t Thresholds) Set() bool { return t.ActiveDecodeBlocks != nil || t.ActivePrefillTokens != nil }

// SetThresholds sets the thresholds it carries and keeps the model's
// others: a nil field leaves that threshold as it is.
type SetThresholds struct {
	Model               string
	ActiveDecodeBlocks  *float64
	ActivePrefillTokens *uint64
}

// ClearThresholds unsets both of a model's thresholds. The (empty)
// record stays, so initial values are not applied again.
type ClearThresholds struct {
	Model string
}

// InitThresholds gives a model the initial thresholds of the command line
// (--active-decode-blocks-threshold, --active-prefill-tokens-threshold)
// when it has no record yet, set or cleared; otherwise it changes nothing.
// The leader writes it once per model it sees.
type InitThresholds struct {
	Model               string
	ActiveDecodeBlocks  *float64
	ActivePrefillTokens *uint64
}

func (SetThresholds) Type() CommandType   { return CmdSetThresholds }
func (ClearThresholds) Type() CommandType { return CmdClearThresholds }
func (InitThresholds) Type() CommandType  { return CmdInitThresholds }

// ValidateThresholds checks a model name and threshold values as every
// threshold command and snapshot record must have them.
func ValidateThresholds(model string, decode *float64) error {
	if model == "" {
		return &FieldError{"model", "required"}
	}
	if len(model) > MaxStringLen {
		return &FieldError{"model", fmt.Sprintf("longer than %d bytes", MaxStringLen)}
	}
	if decode != nil && (math.IsNaN(*decode) || *decode < 0 || *decode > 1) {
		return &FieldError{"active_decode_blocks_threshold", fmt.Sprintf("must be between 0 and 1, got %v", *decode)}
	}
	return nil
}

// Thresholds returns a model's record, set or cleared.
func (c *Catalog) Thresholds(model string) (Thresholds, bool) {
	t, ok := c.thresholds[model]
	return t, ok
}

// AllThresholds returns every model's record, set or cleared, by model.
func (c *Catalog) AllThresholds() []Thresholds {
	out := slices.Collect(maps.Values(c.thresholds))
	slices.SortFunc(out, func(a, b Thresholds) int { return cmp.Compare(a.Model, b.Model) })
	return out
}

// Models returns the distinct model names of the catalog's workers, sorted.
func (c *Catalog) Models() []string {
	seen := map[string]bool{}
	for k := range c.partitions {
		seen[k.Model] = true
	}
	return slices.Sorted(maps.Keys(seen))
}

// putThresholds stores a record as is (restore keeps its ModifyIndex);
// commands go through writeThresholds.
func (e *editor) putThresholds(t Thresholds) {
	ownMap(&e.next.thresholds, &e.thresholdsCopied)
	e.next.thresholds[t.Model] = t
}

func (e *editor) writeThresholds(t Thresholds) {
	t.ModifyIndex = e.next.index
	e.putThresholds(t)
}

func applySetThresholds(e *editor, payload []byte) (outcome, error) {
	cmd := decodePayload[thresholdsV1](CmdSetThresholds, payload)
	if err := ValidateThresholds(cmd.Model, cmd.ActiveDecodeBlocks); err != nil {
		return outcome{}, err
	}
	t := e.next.thresholds[cmd.Model]
	t.Model = cmd.Model
	if cmd.ActiveDecodeBlocks != nil {
		t.ActiveDecodeBlocks = cmd.ActiveDecodeBlocks
	}
	if cmd.ActivePrefillTokens != nil {
		t.ActivePrefillTokens = cmd.ActivePrefillTokens
	}
	e.writeThresholds(t)
	return outcome{thresholds: cmd.Model}, nil
}

func applyClearThresholds(e *editor, payload []byte) (outcome, error) {
	cmd := decodePayload[thresholdsV1](CmdClearThresholds, payload)
	if err := ValidateThresholds(cmd.Model, nil); err != nil {
		return outcome{}, err
	}
	e.writeThresholds(Thresholds{Model: cmd.Model})
	return outcome{thresholds: cmd.Model}, nil
}

func applyInitThresholds(e *editor, payload []byte) (outcome, error) {
	cmd := decodePayload[thresholdsV1](CmdInitThresholds, payload)
	if err := ValidateThresholds(cmd.Model, cmd.ActiveDecodeBlocks); err != nil {
		return outcome{}, err
	}
	if _, ok := e.next.thresholds[cmd.Model]; !ok {
		e.writeThresholds(Thresholds{Model: cmd.Model, ActiveDecodeBlocks: cmd.ActiveDecodeBlocks,
			ActivePrefillTokens: cmd.ActivePrefillTokens})
	}
	return outcome{thresholds: cmd.Model}, nil
}
