package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/kvselect/kvselect/api"
	"github.com/kvselect/kvselect/client"
)

func workersCmd(e *env) *cobra.Command {
	return group("workers", "list, register, change and remove the catalog's workers",
		workersListCmd(e), workersGetCmd(e), workersAddCmd(e), workersPatchCmd(e), workersRemoveCmd(e), workersKeepAliveCmd(e))
}

func workersListCmd(e *env) *cobra.Command {
	var opts client.WorkersOptions
	cmd := leaf("list", "catalog records with lifecycle and listener states (GET /workers)", 0, 0,
		func(*cobra.Command, []string) error {
			return show(e, func(ctx context.Context, c *client.Client) ([]api.Worker, error) { return c.Workers(ctx, opts) },
				func(p *printer, ws []api.Worker, _ *client.ResponseInfo) error { return printWorkers(p, ws) })
		})
	fs := cmd.Flags()
	fs.StringVar(&opts.ModelName, "model", "", "only workers of this model_name")
	fs.StringVar(&opts.TenantID, "tenant", "", "only workers of this tenant_id")
	linearizableFlag(fs, &opts.Linearizable)
	return cmd
}

func workersGetCmd(e *env) *cobra.Command {
	var linearizable bool
	cmd := leaf("get <id>", "one catalog record with its lifecycle and listener states (GET /workers/{id})", 1, 1,
		func(_ *cobra.Command, pos []string) error {
			id, err := parseWorkerID(pos[0])
			if err != nil {
				return err
			}
			get := func(ctx context.Context, c *client.Client) (*api.Worker, error) {
				return c.Worker(ctx, id, linearizable)
			}
			return show(e, get, func(p *printer, w *api.Worker, _ *client.ResponseInfo) error {
				return printWorkers(p, []api.Worker{*w})
			})
		})
	linearizableFlag(cmd.Flags(), &linearizable)
	return cmd
}

func workersAddCmd(e *env) *cobra.Command {
	var wf *workerFlags
	cmd := leaf("add (<json> | @file | --id N [field flags])", "register or replace a worker (POST /workers)", 0, 1,
		func(_ *cobra.Command, pos []string) error {
			body, err := wf.bodyOr(pos, true)
			if err != nil {
				return err
			}
			return workerWrite(e, "stored", func(ctx context.Context, c *client.Client) (*api.WorkerWritten, error) {
				return c.UpsertWorker(ctx, body)
			})
		})
	cmd.Long = `Register a worker, or replace the record of its id (POST /workers). Give the
worker as a JSON object (the body of POST /workers), as @file, as @- for
stdin, or as the field flags below; absent fields take the server's
defaults.`
	cmd.Example = `  kvselectctl workers add --id 1 --model llama --endpoint http://w1:8000 --block-size 16 --kv-events tcp://w1:5557
  kvselectctl workers add --id 2 --dp-size 2 --kv-events 0=tcp://w2:5557 --kv-events 1=tcp://w2:5558 ...
  kvselectctl workers add @worker.json`
	wf = addWorkerFlags(cmd.Flags(), true)
	return cmd
}

func workersPatchCmd(e *env) *cobra.Command {
	var wf *workerFlags
	cmd := leaf("patch <id> (<json> | @file | field flags)", "change only the given fields of a worker (PATCH /workers/{id})", 1, 2,
		func(_ *cobra.Command, pos []string) error {
			id, err := parseWorkerID(pos[0])
			if err != nil {
				return err
			}
			body, err := wf.bodyOr(pos[1:], false)
			if err != nil {
				return err
			}
			return workerWrite(e, "updated", func(ctx context.Context, c *client.Client) (*api.WorkerWritten, error) {
				return c.PatchWorker(ctx, id, body)
			})
		})
	cmd.Example = `  kvselectctl workers patch 1 --endpoint http://w1:8001
  kvselectctl workers patch 1 '{"total_kv_blocks": 4096}'`
	wf = addWorkerFlags(cmd.Flags(), false)
	return cmd
}

func workersRemoveCmd(e *env) *cobra.Command {
	return leaf("rm <id>", "remove a worker (DELETE /workers/{id})", 1, 1,
		func(_ *cobra.Command, pos []string) error {
			id, err := parseWorkerID(pos[0])
			if err != nil {
				return err
			}
			return workerWrite(e, "removed", func(ctx context.Context, c *client.Client) (*api.WorkerWritten, error) {
				return c.DeleteWorker(ctx, id)
			})
		})
}

func workersKeepAliveCmd(e *env) *cobra.Command {
	cmd := leaf("keepalive <id>...", "renew workers' leases (POST /workers/keepalive)", 1, -1,
		func(_ *cobra.Command, pos []string) error {
			ids := make([]uint64, len(pos))
			for i, s := range pos {
				id, err := parseWorkerID(s)
				if err != nil {
					return err
				}
				ids[i] = id
			}
			return show(e, func(ctx context.Context, c *client.Client) (*api.KeepAliveAnswer, error) {
				return c.KeepAliveMany(ctx, ids)
			}, func(p *printer, a *api.KeepAliveAnswer, _ *client.ResponseInfo) error {
				rows := make([][]string, 0, len(a.Leases)+len(a.Failed))
				for _, l := range a.Leases {
					rows = append(rows, []string{strconv.FormatUint(l.WorkerID, 10), "renewed",
						fmt.Sprintf("%ds", l.LeaseTTLSeconds)})
				}
				for _, f := range a.Failed {
					rows = append(rows, []string{strconv.FormatUint(f.WorkerID, 10), f.Code, f.Error})
				}
				if err := p.table([]string{"WORKER", "LEASE", "TTL / WHY"}, rows); err != nil {
					return err
				}
				if len(a.Failed) > 0 {
					return fmt.Errorf("%d of %d leases not renewed", len(a.Failed), len(ids))
				}
				return nil
			})
		})
	cmd.Long = `Renew the leases of workers registered with --lease-ttl (SPEC §3.7), all in
one request. A worker whose lease is not renewed within its TTL is removed
by the leader on every node. Exit status 1 when any lease was not renewed
(not_found: unknown or already lapsed, register it again; conflict: it has
no lease).`
	return cmd
}

func parseWorkerID(s string) (uint64, error) {
	id, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return 0, usageErrorf("worker id %q is not an unsigned 64-bit integer", s)
	}
	return id, nil
}

// workerWrite makes a catalog write (the client follows the leader) and
// prints the record and where the write was applied.
func workerWrite(e *env, verb string, write func(ctx context.Context, c *client.Client) (*api.WorkerWritten, error)) error {
	return show(e, write, func(p *printer, w *api.WorkerWritten, info *client.ResponseInfo) error {
		state := ""
		if verb != "removed" {
			state = ": " + lifecycle(&w.Worker)
		}
		p.linef("worker %d %s%s", w.WorkerID, verb, state)
		p.applied(info, w.CatalogIndex)
		return nil
	})
}

func lifecycle(w *api.Worker) string {
	if len(w.NotSchedulableReasons) == 0 {
		return w.Lifecycle
	}
	return w.Lifecycle + " (" + strings.Join(w.NotSchedulableReasons, "; ") + ")"
}

// lifecycleHere is the catalog's lifecycle, marked when the node that
// answered would not select a schedulable worker (every rank's listener
// stale there).
func lifecycleHere(w *api.Worker) string {
	if w.SchedulableHere != nil && !*w.SchedulableHere && w.Schedulable() {
		return w.Lifecycle + " (stale here)"
	}
	return w.Lifecycle
}

// printWorkers prints one row per worker, then why incomplete workers are
// not schedulable and which listeners failed.
func printWorkers(p *printer, ws []api.Worker) error {
	rows := make([][]string, 0, len(ws))
	var notes []string
	for i := range ws {
		w := &ws[i]
		rows = append(rows, []string{formatUint(w.WorkerID), w.ModelName, w.TenantID, orDash(w.Endpoint),
			formatUint(uint64(w.BlockSize)), dpRanks(w), lifecycleHere(w), listeners(w)})
		notes = append(notes, workerNotes(w)...)
	}
	if err := p.table([]string{"WORKER", "MODEL", "TENANT", "ENDPOINT", "BLOCK", "DP_RANKS", "LIFECYCLE", "LISTENERS"}, rows); err != nil {
		return err
	}
	if len(notes) > 0 {
		p.linef("")
		for _, n := range notes {
			p.linef("%s", n)
		}
	}
	return nil
}

// dpRanks shows the global ranks a worker serves: "0", "0-1", "4-7".
func dpRanks(w *api.Worker) string {
	if w.DataParallelSize <= 1 {
		return formatUint(uint64(w.DataParallelStartRank))
	}
	return fmt.Sprintf("%d-%d", w.DataParallelStartRank, w.DataParallelStartRank+w.DataParallelSize-1)
}

// listeners shows each rank's listener state in rank order:
// "0:active 1:connecting".
func listeners(w *api.Worker) string {
	ranks := slices.Sorted(maps.Keys(w.Listeners))
	parts := make([]string, len(ranks))
	for i, r := range ranks {
		parts[i] = formatUint(uint64(r)) + ":" + w.Listeners[r].State
	}
	return orDash(strings.Join(parts, " "))
}

func workerNotes(w *api.Worker) []string {
	var notes []string
	if len(w.NotSchedulableReasons) > 0 {
		notes = append(notes, fmt.Sprintf("worker %d %s: %s", w.WorkerID, w.Lifecycle, strings.Join(w.NotSchedulableReasons, "; ")))
	}
	for _, r := range slices.Sorted(maps.Keys(w.Listeners)) {
		if l := w.Listeners[r]; l.LastError != "" {
			notes = append(notes, fmt.Sprintf("worker %d rank %d listener %s: %s", w.WorkerID, r, l.State, l.LastError))
		}
	}
	for _, why := range w.ThresholdsNotChecked {
		notes = append(notes, fmt.Sprintf("worker %d: %s", w.WorkerID, why))
	}
	return notes
}

// workerFlags is the flags form of a worker body: each flag given on the
// command line becomes its field; absent flags stay absent, so a PATCH
// changes only what was given.
type workerFlags struct {
	fs                                     *pflag.FlagSet
	id, totalKVBlocks, maxNumBatchedTokens uint64
	model, tenant, endpoint, replay        string
	blockSize, dpSize, dpStart, leaseTTL   uint32
	kvEvents                               []string
}

func addWorkerFlags(fs *pflag.FlagSet, withID bool) *workerFlags {
	wf := &workerFlags{fs: fs}
	if withID {
		fs.Uint64Var(&wf.id, "id", 0, "worker_id (required in the flags form)")
	}
	fs.StringVar(&wf.model, "model", "", "model_name (server default: \"default\")")
	fs.StringVar(&wf.tenant, "tenant", "", "tenant_id (server default: \"default\")")
	fs.StringVar(&wf.endpoint, "endpoint", "", "the worker's inference endpoint")
	fs.Uint32Var(&wf.blockSize, "block-size", 0, "tokens per KV block")
	fs.Uint32Var(&wf.dpSize, "dp-size", 0, "data_parallel_size (server default: 1)")
	fs.Uint32Var(&wf.dpStart, "dp-start", 0, "data_parallel_start_rank (server default: 0)")
	fs.StringArrayVar(&wf.kvEvents, "kv-events", nil,
		"KV events ZMQ `endpoint`: rank=tcp://host:port, once per rank; or tcp://host:port alone for a one-rank worker")
	fs.StringVar(&wf.replay, "replay", "", "replay_endpoint (ZMQ ROUTER of rank 0; rank r uses port+r)")
	fs.Uint64Var(&wf.totalKVBlocks, "total-kv-blocks", 0, "total_kv_blocks (optional, for load shedding)")
	fs.Uint64Var(&wf.maxNumBatchedTokens, "max-batched-tokens", 0, "max_num_batched_tokens (optional, for load shedding)")
	fs.Uint32Var(&wf.leaseTTL, "lease-ttl", 0, "lease_ttl_s: seconds (1-3600) within which the worker must be kept alive (workers keepalive), or it is removed; 0 removes a lease")
	return wf
}

// workerFieldFlags are the flags of a worker's fields.
var workerFieldFlags = []string{"id", "model", "tenant", "endpoint", "block-size", "dp-size", "dp-start", "kv-events",
	"replay", "total-kv-blocks", "max-batched-tokens", "lease-ttl"}

// bodyOr returns the request body: the JSON argument when there is one,
// else the one built from the flags.
func (wf *workerFlags) bodyOr(pos []string, needID bool) (api.WorkerFields, error) {
	var body api.WorkerFields
	given := wf.fs.Changed
	anyGiven := slices.ContainsFunc(workerFieldFlags, given)
	if len(pos) == 1 {
		if anyGiven {
			return body, usageErrorf("give the worker as a JSON argument or as flags, not both")
		}
		return body, jsonArg("the worker JSON", pos[0], &body)
	}
	if !anyGiven {
		return body, usageErrorf("give the worker as a JSON argument, @file, or flags (see --help)")
	}
	if needID && !given("id") {
		return body, usageErrorf("--id is required in the flags form")
	}
	body = api.WorkerFields{WorkerID: ifGiven(given, "id", wf.id), ModelName: ifGiven(given, "model", wf.model),
		TenantID: ifGiven(given, "tenant", wf.tenant), Endpoint: ifGiven(given, "endpoint", wf.endpoint),
		BlockSize: ifGiven(given, "block-size", wf.blockSize), DataParallelSize: ifGiven(given, "dp-size", wf.dpSize),
		DataParallelStartRank: ifGiven(given, "dp-start", wf.dpStart), ReplayEndpoint: ifGiven(given, "replay", wf.replay),
		TotalKVBlocks:       ifGiven(given, "total-kv-blocks", wf.totalKVBlocks),
		MaxNumBatchedTokens: ifGiven(given, "max-batched-tokens", wf.maxNumBatchedTokens),
		LeaseTTLSeconds:     ifGiven(given, "lease-ttl", wf.leaseTTL)}
	if given("kv-events") {
		if err := kvEventsField(wf.kvEvents, &body); err != nil {
			return body, err
		}
	}
	return body, nil
}

// ifGiven is a pointer to v when the flag name was given, else nil.
func ifGiven[T any](given func(name string) bool, name string, v T) *T {
	if !given(name) {
		return nil
	}
	return &v
}

// kvEventsField turns --kv-events values into kv_events_endpoint (one
// endpoint) or kv_events_endpoints (rank=endpoint each).
func kvEventsField(values []string, body *api.WorkerFields) error {
	if len(values) == 1 && !hasRank(values[0]) {
		body.KVEventsEndpoint = &values[0]
		return nil
	}
	endpoints := map[uint32]string{}
	for _, v := range values {
		rank, endpoint, _ := strings.Cut(v, "=")
		if !hasRank(v) || endpoint == "" {
			return usageErrorf("--kv-events %q: with several ranks give rank=endpoint for each", v)
		}
		r, _ := strconv.ParseUint(rank, 10, 32)
		if _, dup := endpoints[uint32(r)]; dup {
			return usageErrorf("--kv-events: rank %s given twice", rank)
		}
		endpoints[uint32(r)] = endpoint
	}
	body.KVEventsEndpoints = &endpoints
	return nil
}

// hasRank reports whether v starts with "<rank>=".
func hasRank(v string) bool {
	rank, _, ok := strings.Cut(v, "=")
	if !ok {
		return false
	}
	_, err := strconv.ParseUint(rank, 10, 32)
	return err == nil
}

// jsonArg decodes a JSON object given inline, as @file, or as @- (stdin)
// into v, refusing fields v does not have, as the server would. what
// names the argument in errors.
func jsonArg(what, arg string, v any) error {
	data := []byte(arg)
	if name, ok := strings.CutPrefix(arg, "@"); ok {
		var err error
		if data, err = readArgFile(name); err != nil {
			return err
		}
	}
	data = bytes.TrimSpace(data)
	if !json.Valid(data) || len(data) == 0 || data[0] != '{' {
		return usageErrorf("%s is not a JSON object", shorten(arg))
	}
	if err := api.Decode(data, v); err != nil {
		return usageErrorf("%s: %v", what, err)
	}
	return nil
}

func readArgFile(name string) ([]byte, error) {
	if name == "-" {
		return io.ReadAll(os.Stdin)
	}
	return os.ReadFile(name)
}

func shorten(s string) string {
	const max = 60
	if len(s) > max {
		return strconv.Quote(s[:max] + "...")
	}
	return strconv.Quote(s)
}
