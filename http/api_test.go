package http_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/kvselect/kvselect/indexer"
	"github.com/kvselect/kvselect/server"
	"github.com/kvselect/kvselect/server/servertest"
)

// client talks JSON to one node.
type client struct {
	t    *testing.T
	base string
	hdr  map[string]string
}

type response struct {
	status int
	header http.Header
	raw    []byte
}

func (r response) json(t *testing.T) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(r.raw, &m); err != nil {
		t.Fatalf("response %q is not a JSON object: %v", r.raw, err)
	}
	return m
}

func (c *client) do(method, path string, body any) response {
	c.t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	case []byte:
		rd = bytes.NewReader(b)
	default:
		raw, err := json.Marshal(b)
		if err != nil {
			c.t.Fatal(err)
		}
		rd = bytes.NewReader(raw)
	}
	req, err := http.NewRequest(method, c.base+path, rd)
	if err != nil {
		c.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	for k, v := range c.hdr {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		c.t.Fatal(err)
	}
	return response{status: resp.StatusCode, header: resp.Header, raw: raw}
}

// expect checks the status and returns the decoded object.
func (c *client) expect(status int, method, path string, body any) map[string]any {
	c.t.Helper()
	r := c.do(method, path, body)
	if r.status != status {
		c.t.Fatalf("%s %s = %d %s, want %d", method, path, r.status, r.raw, status)
	}
	if len(bytes.TrimSpace(r.raw)) == 0 || r.raw[0] != '{' {
		return nil
	}
	return r.json(c.t)
}

// expectList checks the status and returns the decoded array.
func (c *client) expectList(status int, method, path string, body any) []any {
	c.t.Helper()
	r := c.do(method, path, body)
	if r.status != status {
		c.t.Fatalf("%s %s = %d %s, want %d", method, path, r.status, r.raw, status)
	}
	var list []any
	if err := json.Unmarshal(r.raw, &list); err != nil {
		c.t.Fatalf("%s %s: %q is not a JSON array: %v", method, path, r.raw, err)
	}
	return list
}

func startNode(t *testing.T, mutate ...func(*server.Config)) (*server.Server, *client) {
	t.Helper()
	cfg := servertest.Config("n1", t.TempDir())
	for _, m := range mutate {
		m(&cfg)
	}
	s := servertest.MustStart(t, cfg)
	return s, &client{t: t, base: s.URL()}
}

// cache simulates a worker's KV events: blocks with the given local hashes
// stored as one chain on a rank and tier (engine hash = local + 1000).
func cache(t *testing.T, s *server.Server, worker uint64, rank uint32, tier indexer.Tier, parent uint64, locals ...uint64) {
	t.Helper()
	ev := indexer.Event{Kind: indexer.EventStored, Tier: tier, HasParent: parent != 0, Parent: parent + 1000}
	for _, l := range locals {
		ev.Blocks = append(ev.Blocks, indexer.StoredBlock{Hash: l + 1000, Local: l})
	}
	st, err := s.Indexer.Apply(indexer.RankKey{Worker: worker, Rank: rank}, indexer.Batch{Events: []indexer.Event{ev}})
	if err != nil || st.Events[indexer.OutcomeOK] != 1 {
		t.Fatalf("cache: %+v %v", st, err)
	}
}

func workerBody(id uint64, ranks int) map[string]any {
	eps := map[string]string{}
	for r := range ranks {
		eps[fmt.Sprint(r)] = fmt.Sprintf("tcp://127.0.0.1:%d", 5557+r)
	}
	return map[string]any{"worker_id": id, "model_name": "model", "endpoint": fmt.Sprintf("http://worker%d:8000", id),
		"block_size": 16, "data_parallel_size": ranks, "kv_events_endpoints": eps, "replay_endpoint": "tcp://127.0.0.1:5560"}
}

// num reads a JSON number at a dotted path.
func num(t *testing.T, m map[string]any, path string) float64 {
	t.Helper()
	var cur any = m
	for _, k := range strings.Split(path, ".") {
		obj, ok := cur.(map[string]any)
		if !ok {
			t.Fatalf("%s: %v is not an object", path, cur)
		}
		cur = obj[k]
	}
	f, ok := cur.(float64)
	if !ok {
		t.Fatalf("%s = %v (%T), not a number", path, cur, cur)
	}
	return f
}

// Test_RayFlow walks the seed's Ray integration end to end: register,
// select, select_and_reserve, select-then-reserve, lifecycle, loads,
// delete; and checks every number.
func Test_RayFlow(t *testing.T) {
	s, c := startNode(t)
	w1 := c.expect(201, "POST", "/workers", workerBody(1, 2))
	if w1["lifecycle"] != "schedulable" || num(t, w1, "catalog_index") == 0 {
		t.Fatalf("registered worker = %v", w1)
	}
	c.expect(201, "POST", "/workers", workerBody(2, 1))

	// Worker 1 rank 0: blocks 11-14 on device, 15-16 on host.
	// Worker 1 rank 1: blocks 11-12 on device.  Worker 2: nothing.
	cache(t, s, 1, 0, indexer.TierDevice, 0, 11, 12, 13, 14)
	cache(t, s, 1, 0, indexer.TierHost, 14, 15, 16)
	cache(t, s, 1, 1, indexer.TierDevice, 0, 11, 12)

	prompt := map[string]any{"model_name": "model", "block_hashes": []uint64{11, 12, 13, 14, 15, 16, 17, 18},
		"sequence_hashes": []uint64{21, 22, 23, 24, 25, 26, 27, 28}, "isl_tokens": 128}

	// Cost: w1/0 cached (4 + 0.75·2)·16 = 88 → (128−88)/16 + 8 = 10.5;
	// w1/1 cached 32 → 6 + 8 = 14; w2 → 8 + 8 = 16.
	raw := c.do("POST", "/select", merge(prompt, map[string]any{"selection_id": "select-123"}))
	want := `{"selection_id":"select-123","model_name":"model","tenant_id":"default","worker_id":1,"dp_rank":0,` +
		`"endpoint":"http://worker1:8000","block_size":16,` +
		`"overlap":{"longest_matched":96,"gpu":64,"dp":{"0":64,"1":32},"cpu":96,"disk":96},"effective_prefill_tokens":40}`
	if got := strings.TrimSpace(string(raw.raw)); raw.status != 200 || got != want {
		t.Fatalf("select = %d\n%s\nwant\n%s", raw.status, got, want)
	}
	sel := raw.json(t)
	for _, banned := range []string{"cached_tokens", "effective_overlap_blocks", "reservation_id"} {
		if _, ok := sel[banned]; ok {
			t.Fatalf("select response carries %q", banned)
		}
	}

	// Atomic select and reserve books 40 prefill tokens and 8 blocks.
	res := c.expect(200, "POST", "/select_and_reserve", merge(prompt, map[string]any{"reservation_id": "r1"}))
	if res["reservation_id"] != "r1" || res["worker_id"] != 1.0 || num(t, res, "effective_prefill_tokens") != 40 {
		t.Fatalf("select_and_reserve = %v", res)
	}
	// A retry of the same id and prompt gets the same answer (SPEC §3.3);
	// the same id with another prompt is a conflict.
	again := c.expect(200, "POST", "/select_and_reserve", merge(prompt, map[string]any{"reservation_id": "r1"}))
	if fmt.Sprint(again) != fmt.Sprint(res) {
		t.Fatalf("retry = %v, first answer %v", again, res)
	}
	c.expect(409, "POST", "/select_and_reserve", merge(prompt, map[string]any{"reservation_id": "r1", "isl_tokens": 129}))

	// Ray's select-then-reserve: a second request sharing the first six
	// blocks, booked on worker 2 with the effective prefill /select gave.
	shared := map[string]any{"reservation_id": "r2", "model_name": "model", "worker_id": 2, "dp_rank": 0,
		"sequence_hashes": []uint64{21, 22, 23, 24, 25, 26, 31, 32}, "isl_tokens": 128, "effective_prefill_tokens": 128}
	c.expect(201, "POST", "/reservations", shared)
	// And a third on worker 1 rank 0, sharing 6 blocks with r1; the node
	// computes the prefill from its index: 128 − 88 = 40.
	third := merge(prompt, map[string]any{"reservation_id": "r3", "worker_id": 1, "dp_rank": 0,
		"sequence_hashes": []uint64{21, 22, 23, 24, 25, 26, 31, 32}})
	booked := c.expect(201, "POST", "/reservations", third)
	if num(t, booked, "effective_prefill_tokens") != 40 {
		t.Fatalf("computed prefill = %v", booked)
	}

	loads := loadsOf(t, c)
	// w1/0: r1 (8 blocks) + r3 (2 new blocks) = 10 unique, prefill 80.
	checkLoad(t, loads, "1/0", 80, 10, 2)
	checkLoad(t, loads, "1/1", 0, 0, 0)
	checkLoad(t, loads, "2/0", 128, 8, 1)

	// Potential loads of the r1 prompt: w1/0 has all 8 blocks active.
	pl := c.do("POST", "/potential_loads", prompt)
	var rows []map[string]any
	if err := json.Unmarshal(pl.raw, &rows); err != nil || pl.status != 200 || len(rows) != 3 {
		t.Fatalf("potential_loads = %d %s", pl.status, pl.raw)
	}
	wantRows := [][4]float64{ // worker, rank, potential prefill, potential decode
		{1, 0, 80 + 40, 10 + 0}, {1, 1, 0 + 96, 0 + 8}, {2, 0, 128 + 128, 8 + 2},
	}
	for i, w := range wantRows {
		r := rows[i]
		got := [4]float64{num(t, r, "worker_id"), num(t, r, "dp_rank"), num(t, r, "potential_prefill_tokens"), num(t, r, "potential_decode_blocks")}
		if got != w {
			t.Fatalf("potential_loads[%d] = %v, want %v", i, got, w)
		}
	}

	// Overlap scores in blocks per tier.
	ovr := c.do("POST", "/overlap_scores", prompt)
	ov := ovr.json(t)
	// Tiers are cumulative, as Dynamo's: device ≤ host_pinned ≤ disk, with
	// the extensions alone beside them.
	if got := string(ovr.raw); !strings.Contains(got, `{"worker_id":1,"dp_rank":0,"device_blocks":4,"host_pinned_blocks":6,"disk_blocks":6,`+
		`"host_pinned_extension_blocks":2,"disk_extension_blocks":0,"credit_blocks":5.5}`) ||
		num(t, ov, "num_blocks") != 8 || num(t, ov, "block_size") != 16 {
		t.Fatalf("overlap_scores = %s", got)
	}

	// Lifecycle: prefill completes, output blocks decay, free.
	c.expect(200, "POST", "/reservations/r1/prefill_complete", nil)
	c.expect(200, "POST", "/reservations/r1/prefill_complete", nil) // repeat: no-op
	c.expect(200, "POST", "/reservations/r1/output_block", nil)
	checkLoad(t, loadsOf(t, c), "1/0", 40, 11, 2)
	// r1 alone holds blocks 27, 28 and its output block: with decay 0.5
	// they and the new block weigh 0.5 → 8 shared + (2 + 2)·0.5 = 10.
	c.expect(200, "POST", "/reservations/r1/output_block", map[string]any{"decay_fraction": 0.5})
	checkLoad(t, loadsOf(t, c), "1/0", 40, 10, 2)
	c.expect(200, "DELETE", "/reservations/r1", nil)
	c.expect(404, "DELETE", "/reservations/r1", nil)
	checkLoad(t, loadsOf(t, c), "1/0", 40, 8, 1)
	c.expect(200, "DELETE", "/reservations/r3", nil)
	c.expect(200, "DELETE", "/reservations/r2", nil)
	checkLoad(t, loadsOf(t, c), "1/0", 0, 0, 0)
	checkLoad(t, loadsOf(t, c), "2/0", 0, 0, 0)

	// Catalog reads and delete.
	one := c.expect(200, "GET", "/workers/1", nil)
	if one["model_name"] != "model" || one["lifecycle"] != "schedulable" {
		t.Fatalf("GET /workers/1 = %v", one)
	}
	del := c.expect(200, "DELETE", "/workers/1", nil)
	if del["worker_id"] != 1.0 || num(t, del, "catalog_index") == 0 {
		t.Fatalf("DELETE = %v", del)
	}
	c.expect(404, "GET", "/workers/1", nil)
	list := c.do("GET", "/workers?consistency=linearizable", nil)
	if list.status != 200 || strings.Count(string(list.raw), `"worker_id"`) != 1 {
		t.Fatalf("list = %d %s", list.status, list.raw)
	}
	// The deleted worker's blocks left the index: worker 2 is all that is left.
	sel = c.expect(200, "POST", "/select", prompt)
	if sel["worker_id"] != 2.0 || num(t, sel, "overlap.gpu") != 0 || num(t, sel, "overlap.dp.0") != 0 {
		t.Fatalf("after delete = %v", sel)
	}
}

func merge(a, b map[string]any) map[string]any {
	out := map[string]any{}
	for k, v := range a {
		out[k] = v
	}
	for k, v := range b {
		out[k] = v
	}
	return out
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	raw, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(raw)
}

func loadsOf(t *testing.T, c *client, model ...string) map[string][3]float64 {
	t.Helper()
	m := "model"
	if len(model) > 0 {
		m = model[0]
	}
	r := c.do("GET", "/loads?model_name="+m, nil)
	var parts []struct {
		ModelName string `json:"model_name"`
		Loads     []struct {
			WorkerID            uint64  `json:"worker_id"`
			DPRank              uint32  `json:"dp_rank"`
			ActivePrefillTokens float64 `json:"active_prefill_tokens"`
			ActiveDecodeBlocks  float64 `json:"active_decode_blocks"`
			ActiveRequests      float64 `json:"active_requests"`
		} `json:"loads"`
	}
	if err := json.Unmarshal(r.raw, &parts); err != nil || r.status != 200 || len(parts) != 1 {
		t.Fatalf("loads = %d %s (%v)", r.status, r.raw, err)
	}
	out := map[string][3]float64{}
	for _, l := range parts[0].Loads {
		out[fmt.Sprintf("%d/%d", l.WorkerID, l.DPRank)] = [3]float64{l.ActivePrefillTokens, l.ActiveDecodeBlocks, l.ActiveRequests}
	}
	return out
}

func checkLoad(t *testing.T, loads map[string][3]float64, rank string, prefill, decode, requests float64) {
	t.Helper()
	if got, want := loads[rank], [3]float64{prefill, decode, requests}; got != want {
		t.Fatalf("load of %s = %v (prefill, decode, requests), want %v", rank, got, want)
	}
}
