package jepsen

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
	"sort"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/kvselect/kvselect/api"
	"github.com/kvselect/kvselect/client"
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

// catalogInput is what a catalog op asks of one worker id.
type catalogInput struct {
	WorkerID uint64
	Kind     string
	Value    string
}

// catalogOutput is what it got. Unknown ops may have taken effect or not.
type catalogOutput struct {
	Unknown  bool
	NotFound bool
	Value    string
}

// CatalogModel is the porcupine model of the catalog seen through one
// worker id: a register whose state is the record's endpoint, "" when the
// worker is absent. Histories are partitioned per worker id.
//
//   - register(v) → ok: the state becomes v.
//   - patch(v) → ok needs a present worker and makes the state v;
//     → not_found needs an absent one and changes nothing.
//   - delete → ok needs a present worker whose endpoint is the removed
//     record's, and makes it absent; → not_found needs an absent one.
//   - get → v needs state v; → not_found needs an absent worker.
//   - an unknown write applies as if it succeeded (a patch of an absent
//     worker still changes nothing). Its return time is the end of the
//     history, so "it never happened" is the linearization that places it
//     last.
func CatalogModel() porcupine.Model {
	return porcupine.Model{
		Partition: func(history []porcupine.Operation) [][]porcupine.Operation {
			byID := map[uint64][]porcupine.Operation{}
			var ids []uint64
			for _, op := range history {
				id := op.Input.(catalogInput).WorkerID
				if _, ok := byID[id]; !ok {
					ids = append(ids, id)
				}
				byID[id] = append(byID[id], op)
			}
			sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
			out := make([][]porcupine.Operation, 0, len(ids))
			for _, id := range ids {
				out = append(out, byID[id])
			}
			return out
		},
		Init: func() any { return "" },
		Step: func(state, input, output any) (bool, any) {
			return stepCatalog(state.(string), input.(catalogInput), output.(catalogOutput))
		},
		DescribeOperation: func(input, output any) string {
			in, out := input.(catalogInput), output.(catalogOutput)
			call := fmt.Sprintf("%s(%d)", in.Kind, in.WorkerID)
			if in.Value != "" {
				call = fmt.Sprintf("%s(%d, %s)", in.Kind, in.WorkerID, in.Value)
			}
			switch {
			case out.Unknown:
				return call + " → ?"
			case out.NotFound:
				return call + " → not_found"
			case out.Value != "":
				return call + " → " + out.Value
			}
			return call + " → ok"
		},
		DescribeState: func(state any) string {
			if state.(string) == "" {
				return "absent"
			}
			return state.(string)
		},
	}
}

func stepCatalog(state string, in catalogInput, out catalogOutput) (bool, string) {
	present := state != ""
	if out.Unknown {
		switch in.Kind {
		case KindRegister:
			return true, in.Value
		case KindPatch:
			if present {
				return true, in.Value
			}
			return true, state
		case KindDelete:
			return true, ""
		}
		return true, state
	}
	switch in.Kind {
	case KindRegister:
		return true, in.Value
	case KindPatch:
		if out.NotFound {
			return !present, state
		}
		return present, in.Value
	case KindDelete:
		if out.NotFound {
			return !present, state
		}
		return present && (out.Value == "" || out.Value == state), ""
	case KindGet:
		if out.NotFound {
			return !present, state
		}
		return present && out.Value == state, state
	}
	return false, state
}

// CatalogOperations turns the catalog ops of a history into porcupine
// operations. Failed ops (proven to have written nothing) and unknown
// reads are dropped; unknown writes return at the end of the history.
func CatalogOperations(ops []Op) []porcupine.Operation {
	var end time.Duration
	for _, op := range ops {
		end = max(end, op.Call, op.Return)
	}
	end++
	var out []porcupine.Operation
	for _, op := range ops {
		if !op.IsCatalog() || op.Result == ResultFail {
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
		out = append(out, porcupine.Operation{
			ClientId: op.Client,
			Input:    catalogInput{WorkerID: op.WorkerID, Kind: op.Kind, Value: op.Value},
			Call:     int64(op.Call),
			Output:   catalogOutput{Unknown: unknown, NotFound: op.NotFound, Value: op.Output},
			Return:   int64(ret),
		})
	}
	return out
}

// CatalogCheck is the linearizability verdict of a catalog history.
type CatalogCheck struct {
	Verdict Verdict
	// Ops is the number of operations checked, WorkerIDs the number of
	// partitions.
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
	ids := map[uint64]bool{}
	for _, op := range pops {
		ids[op.Input.(catalogInput).WorkerID] = true
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
	// Want is the endpoint the write left ("" for absent), Got what the
	// final catalog holds.
	Want string `json:"want"`
	Got  string `json:"got"`
}

// CheckNoLostWrites compares the final catalog with the last acknowledged
// write of every worker id of the history. Only decisive writes are
// checked: the latest ok write (patch and delete answering not_found
// count, as "absent") such that every other write on the id, ok or
// unknown, returned before it was called. An unknown write never returns,
// so an id with an unknown write before or during its last ok write is
// not judged.
func CheckNoLostWrites(ops []Op, final []api.Worker) []LostWrite {
	got := map[uint64]string{}
	for _, w := range final {
		got[w.WorkerID] = w.Endpoint
	}
	byID := map[uint64][]Op{}
	for _, op := range ops {
		if op.IsCatalog() && op.IsWrite() && op.Result != ResultFail {
			byID[op.WorkerID] = append(byID[op.WorkerID], op)
		}
	}
	var lost []LostWrite
	for _, writes := range byID {
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
		if (w.Kind == KindRegister || w.Kind == KindPatch) && !w.NotFound {
			want = w.Value
		}
		if g := got[w.WorkerID]; g != want {
			lost = append(lost, LostWrite{Op: w, Want: want, Got: g})
		}
	}
	sort.Slice(lost, func(i, j int) bool { return lost[i].Op.WorkerID < lost[j].Op.WorkerID })
	return lost
}

// FetchCatalog reads the whole catalog linearizably through any of the
// nodes, for CheckNoLostWrites.
func FetchCatalog(ctx context.Context, urls []string) ([]api.Worker, error) {
	c, err := client.New(client.Config{Addrs: urls})
	if err != nil {
		return nil, err
	}
	return c.Workers(ctx, client.WorkersOptions{Linearizable: true})
}

// pinnedClients returns one client per node that talks to that node only.
func pinnedClients(urls []string) ([]*client.Client, error) {
	out := make([]*client.Client, len(urls))
	for i, u := range urls {
		c, err := client.New(client.Config{Addrs: []string{u}, Pinned: true})
		if err != nil {
			return nil, err
		}
		out[i] = c
	}
	return out, nil
}

// untilAgreed asks every node with probe and compares the answers' keys
// until all nodes give the same one or ctx ends; it then returns nil, or
// the last disagreement.
func untilAgreed(ctx context.Context, urls []string, what string, probe func(context.Context, *client.Client) (string, error)) error {
	clients, err := pinnedClients(urls)
	if err != nil {
		return err
	}
	return poll(ctx, what+" agrees on every node", func(ctx context.Context) error { return agreement(ctx, clients, urls, what, probe) })
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
// field but the per-node listener status.
func CatalogHash(workers []api.Worker) string {
	recs := make([]api.Worker, len(workers))
	for i, w := range workers {
		w.Listeners = nil
		recs[i] = w
	}
	return hashJSON(recs)
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
// local catalog (GET /workers) to hash the same; it returns nil once they
// do, else the last difference.
func CheckCatalogConverged(ctx context.Context, urls []string) error {
	return untilAgreed(ctx, urls, "catalog", func(ctx context.Context, c *client.Client) (string, error) {
		ws, err := c.Workers(ctx, client.WorkersOptions{})
		if err != nil {
			return "", err
		}
		return CatalogHash(ws), nil
	})
}

// CheckIndexConverged waits, as long as ctx allows, for every node to
// answer POST /overlap_scores identically (every row) for each prompt.
func CheckIndexConverged(ctx context.Context, urls []string, prompts []api.Prompt) error {
	return untilAgreed(ctx, urls, "index", func(ctx context.Context, c *client.Client) (string, error) {
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
// no active request, prefill token or decode block on any rank.
func CheckLoadsZero(ctx context.Context, urls []string, within time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, within)
	defer cancel()
	clients, err := pinnedClients(urls)
	if err != nil {
		return err
	}
	return poll(ctx, "every load is zero", func(ctx context.Context) error { return loadsZero(ctx, clients, urls) })
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
