package server_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/kvselect/kvselect/server/servertest"
)

// Test_BookingBoundsOverHTTP: a real node with small booking bounds answers
// 429 capacity with Retry-After to the booking that would pass them, over
// every booking route, books nothing then, and books again once a booking
// ends (SPEC §11).
func Test_BookingBoundsOverHTTP(t *testing.T) {
	cfg := servertest.Config("n1", t.TempDir())
	cfg.Scheduler.MaxReservations, cfg.Scheduler.MaxReservedBlocks = 2, 1000
	s := servertest.MustStart(t, cfg) // leads and has caught up
	if code, raw := post(t, s.URL()+"/workers", `{"worker_id":1,"endpoint":"http://w1","block_size":16,"kv_events_endpoint":"tcp://127.0.0.1:5001"}`); code != 201 {
		t.Fatalf("register: %d %s", code, raw)
	}
	book := func(path, id string) (*http.Response, map[string]any) {
		t.Helper()
		body := `{"reservation_id":"` + id + `","block_hashes":[1,2],"sequence_hashes":[1,2],"isl_tokens":32}`
		if path == "/reservations" {
			body = `{"reservation_id":"` + id + `","worker_id":1,"sequence_hashes":[1,2],"isl_tokens":32}`
		}
		resp, err := http.Post(s.URL()+path, "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var out map[string]any
		if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
			t.Fatal(err)
		}
		return resp, out
	}
	if resp, out := book("/reservations", "a"); resp.StatusCode != 201 {
		t.Fatalf("first booking: %d %v", resp.StatusCode, out)
	}
	if resp, out := book("/select_and_reserve", "b"); resp.StatusCode != 200 {
		t.Fatalf("second booking: %d %v", resp.StatusCode, out)
	}
	for _, path := range []string{"/reservations", "/select_and_reserve"} {
		resp, out := book(path, "c")
		if resp.StatusCode != 429 || out["code"] != "capacity" || resp.Header.Get("Retry-After") == "" ||
			!strings.Contains(out["error"].(string), "--max-reservations") {
			t.Fatalf("%s past the bound: %d Retry-After %q %v", path, resp.StatusCode, resp.Header.Get("Retry-After"), out)
		}
	}
	if code, raw := get(t, s.URL()+"/reservations/c"); code != 404 {
		t.Fatalf("a refused booking is listed: %d %s", code, raw)
	}
	req, _ := http.NewRequest(http.MethodDelete, s.URL()+"/reservations/a", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp, out := book("/select_and_reserve", "c"); resp.StatusCode != 200 {
		t.Fatalf("booking after a free: %d %v", resp.StatusCode, out)
	}
	_, metrics := get(t, s.URL()+"/metrics")
	for _, want := range []string{
		`kvselect_reservation_capacity_used{kind="reservations",source="local"} 2`,
		`kvselect_reservation_capacity_max{kind="blocks"} 1000`,
		`kvselect_selections_total{outcome="capacity",route="select_and_reserve"} 1`,
	} {
		if !strings.Contains(metrics, want) {
			t.Fatalf("/metrics lacks %s", want)
		}
	}
}
