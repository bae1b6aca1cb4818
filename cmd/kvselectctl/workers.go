package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
)

// workerRecord is a catalog record as GET /workers and the write answers
// show it.
type workerRecord struct {
	WorkerID              uint64                    `json:"worker_id"`
	ModelName             string                    `json:"model_name"`
	TenantID              string                    `json:"tenant_id"`
	Endpoint              string                    `json:"endpoint"`
	BlockSize             uint32                    `json:"block_size"`
	DataParallelStartRank uint32                    `json:"data_parallel_start_rank"`
	DataParallelSize      uint32                    `json:"data_parallel_size"`
	Lifecycle             string                    `json:"lifecycle"`
	NotSchedulableReasons []string                  `json:"not_schedulable_reasons"`
	Listeners             map[string]listenerStatus `json:"listeners"`
	CatalogIndex          uint64                    `json:"catalog_index"`
}

type listenerStatus struct {
	State     string `json:"state"`
	LastError string `json:"last_error"`
}

func workersListCmd(e *env, args []string) error {
	fs := e.flags()
	model := fs.String("model", "", "only workers of this model_name")
	tenant := fs.String("tenant", "", "only workers of this tenant_id")
	linearizable := fs.Bool("linearizable", false, "read from the leader after confirming its leadership (consistency=linearizable)")
	if _, err := e.parse(fs, args, 0, 0); err != nil {
		return err
	}
	c, err := e.client()
	if err != nil {
		return err
	}
	q := partitionQuery(*model, *tenant)
	if *linearizable {
		q.Set("consistency", "linearizable")
	}
	req := request{method: http.MethodGet, path: withEncodedQuery("/workers", q)}
	var resp *response
	if *linearizable {
		resp, err = c.viaLeader(e.ctx, req, false)
	} else {
		resp, err = c.read(e.ctx, req)
	}
	if err != nil {
		return err
	}
	return show(e.out(), resp, printWorkers)
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
	return workerWrite(e, request{method: http.MethodPost, path: "/workers", body: body}, "stored")
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
	return workerWrite(e, request{method: http.MethodPatch, path: "/workers/" + id, body: body}, "updated")
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
	return workerWrite(e, request{method: http.MethodDelete, path: "/workers/" + id}, "removed")
}

func parseWorkerID(s string) (string, error) {
	id, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return "", usageErrorf("worker id %q is not an unsigned 64-bit integer", s)
	}
	return strconv.FormatUint(id, 10), nil
}

// workerWrite sends a catalog write to the leader and prints the record
// and where the write was applied.
func workerWrite(e *env, req request, verb string) error {
	c, err := e.client()
	if err != nil {
		return err
	}
	resp, err := c.viaLeader(e.ctx, req, true)
	if err != nil {
		return err
	}
	return show(e.out(), resp, func(p *printer, w workerRecord) error {
		state := ""
		if verb != "removed" {
			state = ": " + lifecycle(w)
		}
		p.linef("worker %d %s%s", w.WorkerID, verb, state)
		p.applied(resp, w.CatalogIndex)
		return nil
	})
}

func lifecycle(w workerRecord) string {
	if len(w.NotSchedulableReasons) == 0 {
		return w.Lifecycle
	}
	return w.Lifecycle + " (" + strings.Join(w.NotSchedulableReasons, "; ") + ")"
}

// printWorkers prints one row per worker, then why incomplete workers are
// not schedulable and which listeners failed.
func printWorkers(p *printer, ws []workerRecord) error {
	rows := make([][]string, 0, len(ws))
	var notes []string
	for _, w := range ws {
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
func dpRanks(w workerRecord) string {
	if w.DataParallelSize <= 1 {
		return formatUint(uint64(w.DataParallelStartRank))
	}
	return fmt.Sprintf("%d-%d", w.DataParallelStartRank, w.DataParallelStartRank+w.DataParallelSize-1)
}

// listeners shows each rank's listener state in rank order:
// "0:active 1:connecting".
func listeners(w workerRecord) string {
	ranks := sortedRanks(w.Listeners)
	parts := make([]string, len(ranks))
	for i, r := range ranks {
		parts[i] = r + ":" + w.Listeners[r].State
	}
	return orDash(strings.Join(parts, " "))
}

func workerNotes(w workerRecord) []string {
	var notes []string
	if len(w.NotSchedulableReasons) > 0 {
		notes = append(notes, fmt.Sprintf("worker %d %s: %s", w.WorkerID, w.Lifecycle, strings.Join(w.NotSchedulableReasons, "; ")))
	}
	for _, r := range sortedRanks(w.Listeners) {
		if l := w.Listeners[r]; l.LastError != "" {
			notes = append(notes, fmt.Sprintf("worker %d rank %s listener %s: %s", w.WorkerID, r, l.State, l.LastError))
		}
	}
	return notes
}

// sortedRanks returns the rank keys in numeric order.
func sortedRanks(m map[string]listenerStatus) []string {
	ranks := make([]string, 0, len(m))
	for r := range m {
		ranks = append(ranks, r)
	}
	slices.SortFunc(ranks, func(a, b string) int {
		if len(a) != len(b) {
			return len(a) - len(b)
		}
		return strings.Compare(a, b)
	})
	return ranks
}

// workerFlags is the flags form of a worker body: each flag given on the
// command line becomes its JSON field; absent flags stay absent, so a
// PATCH changes only what was given.
type workerFlags struct {
	fs       *flag.FlagSet
	kvEvents []string
}

// workerFields maps each scalar worker flag to its JSON field.
var workerFields = map[string]string{
	"id":                 "worker_id",
	"model":              "model_name",
	"tenant":             "tenant_id",
	"endpoint":           "endpoint",
	"block-size":         "block_size",
	"dp-size":            "data_parallel_size",
	"dp-start":           "data_parallel_start_rank",
	"replay":             "replay_endpoint",
	"total-kv-blocks":    "total_kv_blocks",
	"max-batched-tokens": "max_num_batched_tokens",
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
func (wf *workerFlags) bodyOr(pos []string, needID bool) ([]byte, error) {
	fields := wf.fields()
	if len(pos) == 1 {
		if len(fields) > 0 || len(wf.kvEvents) > 0 {
			return nil, usageErrorf("give the worker as a JSON argument or as flags, not both")
		}
		return jsonArg(pos[0])
	}
	if len(fields) == 0 && len(wf.kvEvents) == 0 {
		return nil, usageErrorf("give the worker as a JSON argument, @file, or flags (see -h)")
	}
	if _, ok := fields["worker_id"]; needID && !ok {
		return nil, usageErrorf("--id is required in the flags form")
	}
	if len(wf.kvEvents) > 0 {
		name, value, err := kvEventsField(wf.kvEvents)
		if err != nil {
			return nil, err
		}
		fields[name] = value
	}
	return json.Marshal(fields)
}

// fields returns the JSON fields of the scalar flags given.
func (wf *workerFlags) fields() map[string]any {
	fields := map[string]any{}
	wf.fs.Visit(func(f *flag.Flag) {
		if name, ok := workerFields[f.Name]; ok {
			fields[name] = f.Value.(flag.Getter).Get()
		}
	})
	return fields
}

// kvEventsField turns --kv-events values into kv_events_endpoint (one
// endpoint) or kv_events_endpoints (rank=endpoint each).
func kvEventsField(values []string) (string, any, error) {
	if len(values) == 1 && !hasRank(values[0]) {
		return "kv_events_endpoint", values[0], nil
	}
	endpoints := map[string]string{}
	for _, v := range values {
		rank, endpoint, _ := strings.Cut(v, "=")
		if !hasRank(v) || endpoint == "" {
			return "", nil, usageErrorf("--kv-events %q: with several ranks give rank=endpoint for each", v)
		}
		if _, dup := endpoints[rank]; dup {
			return "", nil, usageErrorf("--kv-events: rank %s given twice", rank)
		}
		endpoints[rank] = endpoint
	}
	return "kv_events_endpoints", endpoints, nil
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

// jsonArg reads a JSON object given inline, as @file, or as @- (stdin).
func jsonArg(arg string) ([]byte, error) {
	data := []byte(arg)
	if name, ok := strings.CutPrefix(arg, "@"); ok {
		var err error
		if data, err = readArgFile(name); err != nil {
			return nil, err
		}
	}
	data = bytes.TrimSpace(data)
	if !json.Valid(data) || len(data) == 0 || data[0] != '{' {
		return nil, usageErrorf("%s is not a JSON object", shorten(arg))
	}
	return data, nil
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

// partitionQuery holds the model_name and tenant_id filters that are set.
func partitionQuery(model, tenant string) url.Values {
	q := url.Values{}
	if model != "" {
		q.Set("model_name", model)
	}
	if tenant != "" {
		q.Set("tenant_id", tenant)
	}
	return q
}

func withEncodedQuery(path string, q url.Values) string {
	if len(q) == 0 {
		return path
	}
	return path + "?" + q.Encode()
}
