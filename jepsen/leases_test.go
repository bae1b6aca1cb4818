package jepsen

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kvselect/kvselect/api"
)

// lease builds a lease op on worker 1 over [call, ret] milliseconds; gone
// marks a 404 answer.
func lease(kind string, call, ret int, result string, gone bool) Op {
	return Op{Client: LeaseClientBase, Kind: kind, WorkerID: 1, Call: time.Duration(call) * ms, Return: time.Duration(ret) * ms,
		Result: result, NotFound: gone}
}

func Test_CheckLeases(t *testing.T) {
	ttl := int(LeaseTTL / ms)
	for _, tc := range []struct {
		name                string
		ops                 []Op
		renewals, lapses, v int
	}{
		{"renewed, left alone, gone after its TTL", []Op{lease(KindLeaseRegister, 0, 10, ResultOK, false),
			lease(KindKeepAlive, 400, 410, ResultOK, false), lease(KindLeaseGet, 1000, 1010, ResultOK, false),
			lease(KindLeaseGet, 400+ttl, 410+ttl, ResultOK, true)}, 2, 1, 0},
		{"gone while an acknowledged keepalive held it", []Op{lease(KindLeaseRegister, 0, 10, ResultOK, false),
			lease(KindKeepAlive, 400, 410, ResultOK, false), lease(KindKeepAlive, 800, 810, ResultOK, true)}, 2, 1, 1},
		{"gone while the registration held it", []Op{lease(KindLeaseRegister, 0, 10, ResultOK, false),
			lease(KindLeaseGet, 100, ttl-1, ResultOK, true)}, 1, 1, 1},
		// A keepalive still open when the read began proves nothing:
		// the lapse may have come first.
		{"a concurrent renewal does not count", []Op{lease(KindLeaseRegister, 0, 10, ResultOK, false),
			lease(KindKeepAlive, ttl-100, ttl+50, ResultOK, false), lease(KindLeaseGet, ttl, ttl+10, ResultOK, true)}, 2, 1, 0},
		{"failed and unknown renewals promise nothing", []Op{lease(KindLeaseRegister, 0, 10, ResultUnknown, false),
			lease(KindKeepAlive, 100, 110, ResultFail, false), lease(KindKeepAlive, 200, 210, ResultOK, true)}, 0, 1, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := CheckLeases(tc.ops)
			if got.RenewalsOK != tc.renewals || got.Lapses != tc.lapses || len(got.Violations) != tc.v {
				t.Fatalf("got %+v, want %d renewals, %d lapses, %d violations", got, tc.renewals, tc.lapses, tc.v)
			}
		})
	}
}

// fakeLeases is a leader keeping lease deadlines: honest ones at the last
// renewal plus the TTL, or (early) a lease that lapses lapseAfter from
// its registration, renewals or not.
type fakeLeases struct {
	mu         sync.Mutex
	deadline   map[uint64]time.Time
	early      bool
	lapseAfter time.Duration
}

func (f *fakeLeases) node(t *testing.T) string {
	mux := http.NewServeMux()
	notFound := api.Error{Message: "worker not found", Code: api.CodeNotFound}
	id := func(r *http.Request) uint64 { n, _ := strconv.ParseUint(r.PathValue("id"), 10, 64); return n }
	alive := func(id uint64) bool {
		d, ok := f.deadline[id]
		if ok && time.Now().After(d) {
			delete(f.deadline, id)
			return false
		}
		return ok
	}
	mux.HandleFunc("POST /workers", func(w http.ResponseWriter, r *http.Request) {
		var p api.WorkerFields
		if err := json.NewDecoder(r.Body).Decode(&p); err != nil || p.WorkerID == nil || p.LeaseTTLSeconds == nil ||
			*p.LeaseTTLSeconds != uint32(LeaseTTL/time.Second) || *p.ModelName != LeaseModelName {
			writeJSON(w, 400, api.Error{Message: "bad lease registration", Code: api.CodeBadRequest})
			return
		}
		f.mu.Lock()
		ttl := LeaseTTL
		if f.early {
			ttl = f.lapseAfter
		}
		f.deadline[*p.WorkerID] = time.Now().Add(ttl)
		f.mu.Unlock()
		writeJSON(w, 201, api.WorkerWritten{Worker: api.Worker{WorkerID: *p.WorkerID}, CatalogIndex: 1})
	})
	mux.HandleFunc("POST /workers/{id}/keepalive", func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		defer f.mu.Unlock()
		if !alive(id(r)) {
			writeJSON(w, 404, notFound)
			return
		}
		if !f.early {
			f.deadline[id(r)] = time.Now().Add(LeaseTTL)
		}
		writeJSON(w, 200, api.Lease{WorkerID: id(r), LeaseTTLSeconds: 2, ExpiresInMs: 2000})
	})
	mux.HandleFunc("GET /workers/{id}", func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		defer f.mu.Unlock()
		if !alive(id(r)) {
			writeJSON(w, 404, notFound)
			return
		}
		writeJSON(w, 200, api.Worker{WorkerID: id(r)})
	})
	return serveAuthed(t, mux)
}

// Test_RunLeaseClients runs the lease clients against an honest leader,
// whose history CheckLeases accepts, and against one that drops leases a
// renewal still covers, which it must reject.
func Test_RunLeaseClients(t *testing.T) {
	for _, tc := range []struct {
		name  string
		early bool
	}{{"honest", false}, {"drops leases early", true}} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			f := &fakeLeases{deadline: map[uint64]time.Time{}, early: tc.early, lapseAfter: 3 * LeaseRenewEvery}
			url := f.node(t)
			h := NewHistory()
			// One lapse recorded is enough.
			defer cancelWhen(ctx, cancel, "a lapse is recorded", func() bool {
				return slices.ContainsFunc(h.Ops(), func(op Op) bool { return op.NotFound })
			})()
			if err := RunLeaseClients(ctx, Endpoints{URLs: []string{url, url}, Token: testToken}, time.Now(), 1, h); err != nil {
				t.Fatal(err)
			}
			got := CheckLeases(h.Ops())
			if got.Lapses == 0 || got.RenewalsOK < 2 {
				t.Fatalf("%+v: want renewals and a lapse", got)
			}
			if tc.early != (len(got.Violations) > 0) {
				t.Fatalf("violations %q, want some: %v", got.Violations, tc.early)
			}
			if tc.early && !strings.Contains(got.Violations[0], "found it gone") {
				t.Fatalf("violation %q", got.Violations[0])
			}
		})
	}
}

func Test_CheckLeasesLapse(t *testing.T) {
	left := []api.Worker{{WorkerID: leaseIDBase + 1, ModelName: LeaseModelName}}
	for _, tc := range []struct {
		name    string
		workers []api.Worker
		ok      bool
	}{{"every lease lapsed", nil, true}, {"a lease outlives the run", left, false}} {
		t.Run(tc.name, func(t *testing.T) {
			mux := http.NewServeMux()
			mux.HandleFunc("GET /workers", func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Query().Get(api.QueryModelName) != LeaseModelName {
					t.Errorf("listing %s", r.URL)
				}
				writeJSON(w, 200, append([]api.Worker{}, tc.workers...))
			})
			srv := httptest.NewServer(authed(t, mux))
			defer srv.Close()
			err := CheckLeasesLapse(context.Background(), Endpoints{URLs: []string{srv.URL}, Token: testToken}, 300*ms)
			if (err == nil) != tc.ok {
				t.Fatalf("err %v, want ok %v", err, tc.ok)
			}
		})
	}
}
