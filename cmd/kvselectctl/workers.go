package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/kvselect/kvselect/api"
	"github.com/kvselect/kvselect/client"
)

func workersListCmd(e *env, args []string) error {
	fs := e.flags()
	var opts client.WorkersOptions
	fs.StringVar(&opts.ModelName, "model", "", "only workers of this model_name")
	fs.StringVar(&opts.TenantID, "tenant", "", "only workers of this tenant_id")
	fs.BoolVar(&opts.Linearizable, "linearizable", false, "read from the leader after confirming its leadership (consistency=linearizable)")
	if _, err := e.parse(fs, args, 0, 0); err != nil {
		return err
	}
	return show(e, func(ctx context.Context, c *client.Client) ([]api.Worker, error) { return c.Workers(ctx, opts) },
		func(p *printer, ws []api.Worker, _ *client.ResponseInfo) error { return printWorkers(p, ws) })
}

func workersAddCmd(e *env, args []string) error {
	fs := e.flags()
	wf := addWorkerFlags(fs, true)
	pos, err := e.parse(fs, args, 0, 1)
	if err != nil {
		return err
	}
	body, err := wf.bodyOr(pos, true)
	if err != nil {
		return err
	}
	return workerWrite(e, "stored", func(ctx context.Context, c *client.Client) (*api.WorkerWritten, error) {
		return c.UpsertWorker(ctx, body)
	})
}

func workersPatchCmd(e *env, args []string) error {
	fs := e.flags()
	wf := addWorkerFlags(fs, false)
	pos, err := e.parse(fs, args, 1, 2)
	if err != nil {
		return err
	}
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
}

func workersRemoveCmd(e *env, args []string) error {
	pos, err := e.parse(e.flags(), args, 1, 1)
	if err != nil {
		return err
	}
	id, err := parseWorkerID(pos[0])
	if err != nil {
		return err
	}
	return workerWrite(e, "removed", func(ctx context.Context, c *client.Client) (*api.WorkerWritten, error) {
		return c.DeleteWorker(ctx, id)
	})
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

// printWorkers prints one row per worker, then why incomplete workers are
// not schedulable and which listeners failed.
func printWorkers(p *printer, ws []api.Worker) error {
	rows := make([][]string, 0, len(ws))
	var notes []string
	for i := range ws {
		w := &ws[i]
		rows = append(rows, []string{formatUint(w.WorkerID), w.ModelName, w.TenantID, orDash(w.Endpoint),
			formatUint(uint64(w.BlockSize)), dpRanks(w), w.Lifecycle, listeners(w)})
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
	fs       *flag.FlagSet
	kvEvents []string
}

func addWorkerFlags(fs *flag.FlagSet, withID bool) *workerFlags {
	wf := &workerFlags{fs: fs}
	if withID {
		fs.Uint64("id", 0, "worker_id (required in the flags form)")
	}
	fs.String("model", "", "model_name (server default: \"default\")")
	fs.String("tenant", "", "tenant_id (server default: \"default\")")
	fs.String("endpoint", "", "the worker's inference endpoint")
	fs.Uint("block-size", 0, "tokens per KV block")
	fs.Uint("dp-size", 0, "data_parallel_size (server default: 1)")
	fs.Uint("dp-start", 0, "data_parallel_start_rank (server default: 0)")
	fs.Func("kv-events", "KV events ZMQ `endpoint`: rank=tcp://host:port, once per rank; or tcp://host:port alone for a one-rank worker",
		func(v string) error { wf.kvEvents = append(wf.kvEvents, v); return nil })
	fs.String("replay", "", "replay_endpoint (ZMQ ROUTER of rank 0; rank r uses port+r)")
	fs.Uint64("total-kv-blocks", 0, "total_kv_blocks (optional, for load shedding)")
	fs.Uint64("max-batched-tokens", 0, "max_num_batched_tokens (optional, for load shedding)")
	return wf
}

// bodyOr returns the request body: the JSON argument when there is one,
// else the one built from the flags.
func (wf *workerFlags) bodyOr(pos []string, needID bool) (api.WorkerPatch, error) {
	var body api.WorkerPatch
	given := map[string]bool{} // the field flags given
	wf.fs.Visit(func(f *flag.Flag) {
		if !isGlobal(f.Name) && f.Name != "kv-events" {
			given[f.Name] = true
		}
	})
	if len(pos) == 1 {
		if len(given) > 0 || len(wf.kvEvents) > 0 {
			return body, usageErrorf("give the worker as a JSON argument or as flags, not both")
		}
		return body, jsonArg("the worker JSON", pos[0], &body)
	}
	if len(given) == 0 && len(wf.kvEvents) == 0 {
		return body, usageErrorf("give the worker as a JSON argument, @file, or flags (see -h)")
	}
	if needID && !given["id"] {
		return body, usageErrorf("--id is required in the flags form")
	}
	get := func(name string) any { return wf.fs.Lookup(name).Value.(flag.Getter).Get() }
	str := func(name string) *string {
		if !given[name] {
			return nil
		}
		return api.Ptr(get(name).(string))
	}
	u32 := func(name string) *uint32 {
		if !given[name] {
			return nil
		}
		return api.Ptr(uint32(get(name).(uint)))
	}
	u64 := func(name string) *uint64 {
		if !given[name] {
			return nil
		}
		return api.Ptr(get(name).(uint64))
	}
	body = api.WorkerPatch{WorkerID: u64("id"), ModelName: str("model"), TenantID: str("tenant"), Endpoint: str("endpoint"),
		BlockSize: u32("block-size"), DataParallelSize: u32("dp-size"), DataParallelStartRank: u32("dp-start"),
		ReplayEndpoint: str("replay"), TotalKVBlocks: u64("total-kv-blocks"), MaxNumBatchedTokens: u64("max-batched-tokens")}
	if len(wf.kvEvents) > 0 {
		if err := kvEventsField(wf.kvEvents, &body); err != nil {
			return body, err
		}
	}
	return body, nil
}

// kvEventsField turns --kv-events values into kv_events_endpoint (one
// endpoint) or kv_events_endpoints (rank=endpoint each).
func kvEventsField(values []string, body *api.WorkerPatch) error {
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
