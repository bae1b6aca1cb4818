package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/kvselect/kvselect/server"
	"github.com/kvselect/kvselect/server/servertest"
)

func post(t *testing.T, url, body string) (int, string) {
	t.Helper()
	resp, err := http.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(raw)
}

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(raw)
}

// catalogOnly returns GET /workers without the listener status, which is
// this node's live view of its ZMQ connections, not catalog.
func catalogOnly(t *testing.T, url string) string {
	t.Helper()
	_, body := get(t, url+"/workers")
	var ws []map[string]any
	if err := json.Unmarshal([]byte(body), &ws); err != nil {
		t.Fatalf("GET /workers: %v: %s", err, body)
	}
	for _, w := range ws {
		delete(w, "listeners")
	}
	out, _ := json.Marshal(ws)
	return string(out)
}

// Test_RestartKeepsCatalog registers workers, stops the node and starts a
// new process-equivalent on the same data dir: the catalog is back, the
// workers are schedulable again and selection works without any write.
func Test_RestartKeepsCatalog(t *testing.T) {
	dir := t.TempDir()
	s, err := server.Start(servertest.Config("n1", dir))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := s.Node.WaitForLeader(ctx); err != nil {
		t.Fatal(err)
	}
	for id := 1; id <= 3; id++ {
		body := fmt.Sprintf(`{"worker_id":%d,"endpoint":"http://w%d","block_size":16,"kv_events_endpoint":"tcp://127.0.0.1:%d"}`, id, id, 5000+id)
		if code, raw := post(t, s.URL()+"/workers", body); code != 201 {
			t.Fatalf("register: %d %s", code, raw)
		}
	}
	if code, raw := post(t, s.URL()+"/select", `{"block_hashes":[1],"sequence_hashes":[1],"isl_tokens":16}`); code != 200 {
		t.Fatalf("select before restart: %d %s", code, raw)
	}
	before := catalogOnly(t, s.URL())
	lastWrite := s.Node.Catalog().Index()
	if err := s.Close(ctx); err != nil {
		t.Fatal(err)
	}

	s2 := servertest.MustStart(t, servertest.Config("n1", dir))
	// The catalog comes back once the log replays; wait for the index of
	// the last write.
	if err := s2.Node.WaitApplied(ctx, lastWrite); err != nil {
		t.Fatal(err)
	}
	after := catalogOnly(t, s2.URL())
	if before != after {
		t.Fatalf("catalog changed across restart:\nbefore %s\nafter  %s", before, after)
	}
	if code, raw := get(t, s2.URL()+"/ready"); code != 200 || !strings.Contains(raw, `"schedulable_workers":3`) {
		t.Fatalf("ready after restart: %d %s", code, raw)
	}
	if code, raw := post(t, s2.URL()+"/select", `{"block_hashes":[1],"sequence_hashes":[1],"isl_tokens":16}`); code != 200 {
		t.Fatalf("select after restart: %d %s", code, raw)
	}
}

func Test_ReadyAndMetrics(t *testing.T) {
	s := servertest.MustStart(t, servertest.Config("n1", t.TempDir()))
	if code, raw := get(t, s.URL()+"/ready"); code != 503 || !strings.Contains(raw, `"ready":false`) ||
		!strings.Contains(raw, `"state":"leader"`) {
		t.Fatalf("ready with no worker: %d %s", code, raw)
	}
	post(t, s.URL()+"/workers", `{"worker_id":1,"endpoint":"http://w","block_size":16,"kv_events_endpoint":"tcp://127.0.0.1:5000"}`)
	post(t, s.URL()+"/select", `{"block_hashes":[1],"sequence_hashes":[1],"isl_tokens":16}`)
	code, raw := get(t, s.URL()+"/metrics")
	if code != 200 {
		t.Fatalf("metrics: %d", code)
	}
	for _, series := range []string{
		`kvselect_http_requests_total{method="POST",route="/select",status="200"} 1`,
		`kvselect_selections_total{outcome="selected",route="select"} 1`,
		`kvselect_raft_is_leader 1`,
		`kvselect_index_ranks{model_name="default",tenant_id="default"} 1`,
		`kvselect_catalog_apply_duration_seconds_count{command="upsert_worker"} 1`,
		`kvselect_kv_events_applied_total`,
	} {
		if !strings.Contains(raw, series) {
			t.Errorf("metrics lack %q", series)
		}
	}
}
