package jepsen

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/kvselect/kvselect/api"
	"github.com/kvselect/kvselect/client"
	"github.com/kvselect/kvselect/internal/poll"
)

// Verdict is a checker's answer. A checker that could not decide (a
// porcupine timeout) says VerdictInconclusive, which never counts as a
// pass.
type Verdict string

// Verdicts.
const (
	VerdictYes          Verdict = "yes"
	VerdictNo           Verdict = "no"
	VerdictInconclusive Verdict = "inconclusive"
	VerdictNotChecked   Verdict = "-"
)

// catalogInput is what a catalog op asks of one key: a worker id
// ("worker 1001") or the busy thresholds of ThresholdModel.
type catalogInput struct {
	Key   string
	Kind  string
	Value string
}

// catalogOutput is what it got. Unknown ops may have taken effect or not.
// Rec is the answered record of an ok worker op; Problem says why its
// body could not be read (the model rejects it).
type catalogOutput struct {
	Unknown  bool
	NotFound bool
	Value    string
	Rec      answeredRecord
	Problem  string
}

// answeredRecord is what the model checks of a worker answer beyond its
// endpoint: the Raft indexes, and every other field rendered (Shape).
type answeredRecord struct {
	Create, Modify, CatalogIndex uint64
	Shape                        string
}

// regState is the model's state of one key: the endpoint of the worker
// ("" when absent) and the indexes its record was created and last
// modified at (0 when an unknown write leaves them unknown); for the
// thresholds key, Value is ThresholdValue of the thresholds in force.
type regState struct {
	Value          string
	Create, Modify uint64
}

// ThresholdModel is the model whose busy thresholds the threshold client
// writes: the kvsim workers', so that a tight threshold sheds selections.
const ThresholdModel = "default"

// thresholdKey is the model's key of the busy thresholds.
const thresholdKey = "thresholds " + ThresholdModel

// CatalogWorkerReason is the one reason a catalog client's worker is
// incomplete: it has no KV event endpoint (SPEC §3.1).
const CatalogWorkerReason = "kv_events endpoint is required for dp_rank 0"

// catalogShape is the Shape every answer about catalog worker id must
// have: what register writes, whatever endpoint a later patch sets.
func catalogShape(id uint64) string {
	return workerShape(api.Worker{WorkerID: id, ModelName: CatalogModelName, TenantID: "default", BlockSize: CatalogBlockSize,
		DataParallelSize: 1, Lifecycle: api.LifecycleIncomplete, NotSchedulableReasons: []string{CatalogWorkerReason}})
}

// workerShape renders every field of a record but its endpoint and Raft
// indexes.
func workerShape(w api.Worker) string {
	return fmt.Sprintf("worker_id=%d model=%q tenant=%q block_size=%d dp=%d+%d kv_events=%d replay=%q total_kv_blocks=%d "+
		"max_batched=%d lease=%d lifecycle=%q reasons=%q thresholds_not_checked=%q listeners=%d",
		w.WorkerID, w.ModelName, w.TenantID, w.BlockSize, w.DataParallelStartRank, w.DataParallelSize, len(w.KVEventsEndpoints),
		w.ReplayEndpoint, w.TotalKVBlocks, w.MaxNumBatchedTokens, w.LeaseTTLSeconds, w.Lifecycle, w.NotSchedulableReasons,
		w.ThresholdsNotChecked, len(w.Listeners))
}

// ThresholdValue renders busy thresholds as the model compares them: ""
// when neither is set.
func ThresholdValue(decode *float64, prefill *uint64) string {
	if decode == nil && prefill == nil {
		return ""
	}
	d, p := "-", "-"
	if decode != nil {
		d = strconv.FormatFloat(*decode, 'g', -1, 64)
	}
	if prefill != nil {
		p = strconv.FormatUint(*prefill, 10)
	}
	return "decode=" + d + " prefill=" + p
}

// CatalogModel is the porcupine model of the catalog seen through one key.
// For a worker id it is a register whose state is the record (endpoint and
// indexes), absent at first; histories are partitioned per key. An ok
// answer must be exactly what the server owes (SPEC §3.1): every field
// of the record as the catalog clients register it (Shape), the endpoint,
// and indexes that fit the state.
//
//   - register(v) → ok: the answer is the record with endpoint v,
//     modify_index = catalog_index, later than the state's; a new record's
//     create_index is its modify_index, an existing one keeps its own.
//     The state becomes that record.
//   - patch(v) → ok needs a present worker; the answer is as for a
//     register of a present one. → not_found needs an absent one.
//   - delete → ok needs a present worker and answers the removed record
//     (the state's, with a catalog_index past its modify_index), making it
//     absent; → not_found needs an absent one.
//   - get → the state's record (no catalog_index); → not_found needs an
//     absent worker.
//   - an unknown write applies as if it succeeded, with unknown indexes (a
//     patch of an absent worker still changes nothing). Its return time is
//     the end of the history, so "it never happened" is the linearization
//     that places it last.
//
// For the thresholds key the state is ThresholdValue: set(v) answers v,
// clear answers none, a linearizable get answers the state.
func CatalogModel() porcupine.Model {
	return porcupine.Model{
		Partition: func(history []porcupine.Operation) [][]porcupine.Operation {
			byKey := map[string][]porcupine.Operation{}
			var keys []string
			for _, op := range history {
				k := op.Input.(catalogInput).Key
				if _, ok := byKey[k]; !ok {
					keys = append(keys, k)
				}
				byKey[k] = append(byKey[k], op)
			}
			sort.Strings(keys)
			out := make([][]porcupine.Operation, 0, len(keys))
			for _, k := range keys {
				out = append(out, byKey[k])
			}
			return out
		},
		Init: func() any { return regState{} },
		Step: func(state, input, output any) (bool, any) {
			return stepCatalog(state.(regState), input.(catalogInput), output.(catalogOutput))
		},
		DescribeOperation: func(input, output any) string {
			in, out := input.(catalogInput), output.(catalogOutput)
			call := fmt.Sprintf("%s(%s)", in.Kind, in.Key)
			if in.Value != "" {
				call = fmt.Sprintf("%s(%s, %s)", in.Kind, in.Key, in.Value)
			}
			switch {
			case out.Unknown:
				return call + " → ?"
			case out.Problem != "":
				return call + " → " + out.Problem
			case out.NotFound:
				return call + " → not_found"
			case out.Rec.Modify != 0:
				return fmt.Sprintf("%s → %s @%d/%d", call, out.Value, out.Rec.Create, out.Rec.Modify)
			case out.Value != "":
				return call + " → " + out.Value
			}
			return call + " → ok"
		},
		DescribeState: func(state any) string {
			st := state.(regState)
			switch {
			case st.Value == "":
				return "absent"
			case st.Modify != 0 || st.Create != 0:
				return fmt.Sprintf("%s @%d/%d", st.Value, st.Create, st.Modify)
			}
			return st.Value
		},
	}
}

func stepCatalog(st regState, in catalogInput, out catalogOutput) (bool, regState) {
	if out.Problem != "" {
		return false, st
	}
	if in.Key == thresholdKey {
		return stepThresholds(st, in, out)
	}
	present := st.Value != ""
	if out.Unknown {
		switch in.Kind {
		case KindRegister:
			if present {
				return true, regState{Value: in.Value, Create: st.Create}
			}
			return true, regState{Value: in.Value}
		case KindPatch:
			if present {
				return true, regState{Value: in.Value, Create: st.Create}
			}
			return true, st
		case KindDelete:
			return true, regState{}
		}
		return true, st
	}
	if out.NotFound {
		return !present && in.Kind != KindRegister, st
	}
	r := out.Rec
	if r.Shape != catalogShape(workerIDOfKey(in.Key)) {
		return false, st
	}
	known := func(want, got uint64) bool { return want == 0 || want == got }
	switch in.Kind {
	case KindRegister, KindPatch:
		ok := out.Value == in.Value && r.Modify != 0 && r.Modify == r.CatalogIndex && r.Modify > st.Modify
		if present {
			ok = ok && known(st.Create, r.Create) && r.Create < r.Modify
		} else {
			ok = ok && in.Kind == KindRegister && r.Create == r.Modify
		}
		return ok, regState{Value: in.Value, Create: r.Create, Modify: r.Modify}
	case KindDelete:
		ok := present && out.Value == st.Value && known(st.Create, r.Create) && known(st.Modify, r.Modify) &&
			r.Create != 0 && r.Create <= r.Modify && r.CatalogIndex > r.Modify
		return ok, regState{}
	case KindGet:
		ok := present && out.Value == st.Value && known(st.Create, r.Create) && known(st.Modify, r.Modify) &&
			r.Create != 0 && r.Create <= r.Modify && r.CatalogIndex == 0
		return ok, regState{Value: st.Value, Create: r.Create, Modify: r.Modify}
	}
	return false, st
}

func stepThresholds(st regState, in catalogInput, out catalogOutput) (bool, regState) {
	if out.Unknown {
		switch in.Kind {
		case KindThresholdSet:
			return true, regState{Value: in.Value}
		case KindThresholdClear:
			return true, regState{}
		}
		return true, st
	}
	switch in.Kind {
	case KindThresholdSet:
		return out.Value == in.Value, regState{Value: in.Value}
	case KindThresholdClear:
		return out.Value == "", regState{}
	case KindThresholdGet:
		return out.Value == st.Value, st
	}
	return false, st
}

// workerIDOfKey is the worker id of a "worker N" key (0 otherwise).
func workerIDOfKey(key string) uint64 {
	id, _ := strconv.ParseUint(strings.TrimPrefix(key, "worker "), 10, 64)
	return id
}

// opKey is the model's key of a linearizable op.
func opKey(op Op) string {
	if op.IsThreshold() {
		return thresholdKey
	}
	return "worker " + strconv.FormatUint(op.WorkerID, 10)
}

// CatalogOperations turns the linearizable ops of a history (worker and
// threshold ops) into porcupine operations. Failed ops (proven to have
// written nothing) and unknown reads are dropped; unknown writes return
// at the end of the history. The body of an ok worker answer is read
// here, once; one that does not decode is a Problem the model rejects.
func CatalogOperations(ops []Op) []porcupine.Operation {
	var end time.Duration
	for _, op := range ops {
		end = max(end, op.Call, op.Return)
	}
	end++
	var out []porcupine.Operation
	for _, op := range ops {
		if !op.IsLinearizable() || op.Result == ResultFail {
			continue
		}
		unknown := op.Result != ResultOK
		if unknown && !op.IsWrite() {
			continue
		}
		ret := op.Return
		if unknown {
			ret = end
		}
		o := catalogOutput{Unknown: unknown, NotFound: op.NotFound, Value: op.Output}
		if !unknown && !op.NotFound && op.IsCatalog() {
			o.Rec, o.Problem = readAnswer(op)
		}
		out = append(out, porcupine.Operation{
			ClientId: op.Client,
			Input:    catalogInput{Key: opKey(op), Kind: op.Kind, Value: op.Value},
			Call:     int64(op.Call),
			Output:   o,
			Return:   int64(ret),
		})
	}
	return out
}

// readAnswer reads an ok worker op's Body; the endpoint must be its
// Output.
func readAnswer(op Op) (answeredRecord, string) {
	if op.Body == "" {
		return answeredRecord{}, "no answer body"
	}
	var w api.WorkerWritten
	if err := json.Unmarshal([]byte(op.Body), &w); err != nil {
		return answeredRecord{}, "undecodable answer: " + err.Error()
	}
	if w.Endpoint != op.Output {
		return answeredRecord{}, fmt.Sprintf("answer endpoint %q, output %q", w.Endpoint, op.Output)
	}
	return answeredRecord{Create: w.CreateIndex, Modify: w.ModifyIndex, CatalogIndex: w.CatalogIndex, Shape: workerShape(w.Worker)}, ""
}

// CatalogCheck is the linearizability verdict of a catalog history.
type CatalogCheck struct {
	Verdict Verdict
	// Ops is the number of operations checked, WorkerIDs the number of
	// partitions (worker ids, and the thresholds).
	Ops, WorkerIDs int
	// Info feeds the HTML visualisation (WriteRun).
	Info porcupine.LinearizationInfo `json:"-"`
}

// DefaultCheckTimeout bounds a linearizability check given no timeout.
const DefaultCheckTimeout = time.Minute

// CheckCatalogLinearizable checks the catalog ops of a history against
// CatalogModel. Past timeout (DefaultCheckTimeout when timeout <= 0) the
// verdict is inconclusive.
func CheckCatalogLinearizable(ops []Op, timeout time.Duration) CatalogCheck {
	if timeout <= 0 {
		timeout = DefaultCheckTimeout
	}
	pops := CatalogOperations(ops)
	ids := map[string]bool{}
	for _, op := range pops {
		ids[op.Input.(catalogInput).Key] = true
	}
	res, info := porcupine.CheckOperationsVerbose(CatalogModel(), pops, timeout)
	v := VerdictInconclusive
	switch res {
	case porcupine.Ok:
		v = VerdictYes
	case porcupine.Illegal:
		v = VerdictNo
	}
	return CatalogCheck{Verdict: v, Ops: len(pops), WorkerIDs: len(ids), Info: info}
}

// LostWrite is an acknowledged write the final catalog does not reflect.
type LostWrite struct {
	Op Op `json:"op"`
	// Want is the endpoint (or ThresholdValue) the write left ("" for
	// absent), Got what the final catalog holds.
	Want string `json:"want"`
	Got  string `json:"got"`
}

// CheckNoLostWrites compares the final catalog (its workers and the busy
// thresholds of ThresholdModel, as ThresholdValue) with the last
// acknowledged write of every key of the history. Only decisive writes
// are checked: the latest ok write (patch and delete answering not_found
// count, as "absent") such that every other write on the key, ok or
// unknown, returned before it was called. An unknown write never
// returns, so a key with an unknown write before or during its last ok
// write is not judged.
func CheckNoLostWrites(ops []Op, final []api.Worker, finalThresholds string) []LostWrite {
	got := map[string]string{thresholdKey: finalThresholds}
	for _, w := range final {
		got["worker "+strconv.FormatUint(w.WorkerID, 10)] = w.Endpoint
	}
	byKey := map[string][]Op{}
	for _, op := range ops {
		if op.IsLinearizable() && op.IsWrite() && op.Result != ResultFail {
			byKey[opKey(op)] = append(byKey[opKey(op)], op)
		}
	}
	var lost []LostWrite
	for key, writes := range byKey {
		last := -1
		for i, op := range writes {
			if op.Result == ResultOK && (last < 0 || op.Call > writes[last].Call) {
				last = i
			}
		}
		if last < 0 {
			continue
		}
		w := writes[last]
		decisive := true
		for i, op := range writes {
			ret := op.Return
			if op.Result != ResultOK {
				ret = math.MaxInt64
			}
			if i != last && ret >= w.Call {
				decisive = false
				break
			}
		}
		if !decisive {
			continue
		}
		want := ""
		if (w.Kind == KindRegister || w.Kind == KindPatch || w.Kind == KindThresholdSet) && !w.NotFound {
			want = w.Value
		}
		if g := got[key]; g != want {
			lost = append(lost, LostWrite{Op: w, Want: want, Got: g})
		}
	}
	sort.Slice(lost, func(i, j int) bool { return opKey(lost[i].Op) < opKey(lost[j].Op) })
	return lost
}

// FetchCatalog reads the whole catalog linearizably through any of the
// nodes, for CheckNoLostWrites: the workers, and the busy thresholds of
// ThresholdModel as ThresholdValue.
func FetchCatalog(ctx context.Context, ep Endpoints) ([]api.Worker, string, error) {
	c, err := client.New(client.Config{Addrs: ep.URLs, Token: ep.Token})
	if err != nil {
		return nil, "", err
	}
	ws, err := c.Workers(ctx, client.WorkersOptions{Linearizable: true})
	if err != nil {
		return nil, "", err
	}
	ts, err := c.BusyThresholds(ctx, true)
	if err != nil {
		return nil, "", err
	}
	return ws, thresholdsOf(ts), nil
}

// thresholdsOf is ThresholdValue of ThresholdModel's entry in a listing
// ("" when it has none; a marker when it has several, which no model
// state matches).
func thresholdsOf(ts *api.BusyThresholds) string {
	var out []string
	for _, t := range ts.Thresholds {
		if t.Model == ThresholdModel {
			out = append(out, ThresholdValue(t.ActiveDecodeBlocksThreshold, t.ActivePrefillTokensThreshold))
		}
	}
	switch len(out) {
	case 0:
		return ""
	case 1:
		return out[0]
	}
	return "listed twice: " + strings.Join(out, " | ")
}

// untilAgreed asks every node with probe and compares the answers' keys
// until all nodes give the same one or ctx ends; it then returns nil, or
// the last disagreement.
func untilAgreed(ctx context.Context, ep Endpoints, what string, probe func(context.Context, *client.Client) (string, error)) error {
	clients, err := pinnedClients(ep)
	if err != nil {
		return err
	}
	return poll.Until(ctx, pollEvery, what+" agrees on every node", func(ctx context.Context) error { return agreement(ctx, clients, ep.URLs, what, probe) })
}

func agreement(ctx context.Context, clients []*client.Client, urls []string, what string, probe func(context.Context, *client.Client) (string, error)) error {
	keys := make([]string, len(clients))
	for i, c := range clients {
		k, err := probe(ctx, c)
		if err != nil {
			return fmt.Errorf("%s of %s: %w", what, urls[i], err)
		}
		keys[i] = k
	}
	for i := 1; i < len(keys); i++ {
		if keys[i] != keys[0] {
			return fmt.Errorf("%s diverged: %s has %s, %s has %s", what, urls[0], keys[0], urls[i], keys[i])
		}
	}
	return nil
}

// CatalogHash hashes the replicated part of a catalog listing: every
// field but the per-node listener status, and the busy thresholds.
func CatalogHash(workers []api.Worker, thresholds []api.BusyThreshold) string {
	recs := make([]api.Worker, len(workers))
	for i, w := range workers {
		w.Listeners = nil
		recs[i] = w
	}
	return hashJSON(struct {
		Workers    []api.Worker
		Thresholds []api.BusyThreshold
	}{recs, thresholds})
}

func hashJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return "unencodable: " + err.Error()
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:8])
}

// CheckCatalogConverged waits, as long as ctx allows, for every node's
// local catalog (GET /workers and GET /busy_threshold) to hash the same;
// it returns nil once they do, else the last difference.
func CheckCatalogConverged(ctx context.Context, ep Endpoints) error {
	return untilAgreed(ctx, ep, "catalog", func(ctx context.Context, c *client.Client) (string, error) {
		ws, err := c.Workers(ctx, client.WorkersOptions{})
		if err != nil {
			return "", err
		}
		ts, err := c.BusyThresholds(ctx, false)
		if err != nil {
			return "", err
		}
		return CatalogHash(ws, ts.Thresholds), nil
	})
}

// CheckIndexConverged waits, as long as ctx allows, for every node to
// answer POST /overlap_scores identically (every row) for each prompt.
func CheckIndexConverged(ctx context.Context, ep Endpoints, prompts []api.Prompt) error {
	return untilAgreed(ctx, ep, "index", func(ctx context.Context, c *client.Client) (string, error) {
		rows := make([]*api.OverlapScores, len(prompts))
		for i, p := range prompts {
			s, err := c.OverlapScores(ctx, p)
			if err != nil {
				return "", err
			}
			rows[i] = s
		}
		return hashJSON(rows), nil
	})
}

// CheckLoadsZero waits up to within for every node's GET /loads to show
// no active request, prefill token or decode block on any rank. When
// some load stays, the error names it and the bookings each node still
// holds (GET /reservations: id, origin), for the post-mortem.
func CheckLoadsZero(ctx context.Context, ep Endpoints, within time.Duration) error {
	wctx, cancel := context.WithTimeout(ctx, within)
	defer cancel()
	clients, err := pinnedClients(ep)
	if err != nil {
		return err
	}
	err = poll.Until(wctx, pollEvery, "every load is zero", func(ctx context.Context) error { return loadsZero(ctx, clients, ep.URLs) })
	if err == nil {
		return nil
	}
	return fmt.Errorf("within %v of the heal: %w%s", within, err, leftBookings(ctx, clients, ep.URLs))
}

func loadsZero(ctx context.Context, clients []*client.Client, urls []string) error {
	for i, c := range clients {
		parts, err := c.Loads(ctx, "", "")
		if err != nil {
			return fmt.Errorf("loads of %s: %w", urls[i], err)
		}
		for _, p := range parts {
			for _, l := range p.Loads {
				if l.ActiveRequests != 0 || l.ActivePrefillTokens != 0 || l.ActiveDecodeBlocks != 0 {
					return fmt.Errorf("loads of %s: %s/%s worker %d rank %d has %d requests, %d prefill tokens, %g decode blocks",
						urls[i], p.ModelName, p.TenantID, l.WorkerID, l.DPRank, l.ActiveRequests, l.ActivePrefillTokens, l.ActiveDecodeBlocks)
				}
			}
		}
	}
	return nil
}

// leftBookings lists, per node, up to five bookings it still holds.
func leftBookings(ctx context.Context, clients []*client.Client, urls []string) string {
	var b strings.Builder
	for i, c := range clients {
		lctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		page, err := c.Reservations(lctx, api.ReservationsQuery{})
		cancel()
		if err != nil {
			fmt.Fprintf(&b, "; bookings of %s: %v", urls[i], err)
			continue
		}
		var ids []string
		for k, r := range page.Reservations {
			if k == 5 {
				ids = append(ids, "...")
				break
			}
			where := api.OriginLocal
			if r.Origin != "" && r.Origin != api.OriginLocal {
				where = r.Origin
				if r.OriginNode != "" {
					where += " from " + r.OriginNode
				}
			}
			ids = append(ids, fmt.Sprintf("%s (%s)", r.ReservationID, where))
		}
		if len(ids) > 0 {
			fmt.Fprintf(&b, "; %s holds %s", urls[i], strings.Join(ids, ", "))
		}
	}
	return b.String()
}
