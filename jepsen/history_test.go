package jepsen

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kvselect/kvselect/api"
	"github.com/kvselect/kvselect/client"
)

func Test_History_ConcurrentAddAndOrder(t *testing.T) {
	h := NewHistory()
	var wg sync.WaitGroup
	for c := range 8 {
		wg.Go(func() {
			for i := range 50 {
				h.Add(Op{Client: c, Kind: KindGet, Call: time.Duration(50-i) * ms})
			}
		})
	}
	wg.Wait()
	ops := h.Ops()
	if len(ops) != 400 {
		t.Fatalf("%d ops, want 400", len(ops))
	}
	for i := 1; i < len(ops); i++ {
		a, b := ops[i-1], ops[i]
		if a.Call > b.Call || (a.Call == b.Call && a.Client > b.Client) {
			t.Fatalf("ops %d and %d out of order: %+v %+v", i-1, i, a, b)
		}
	}
}

func Test_JSONL_RoundTrip(t *testing.T) {
	ops := []Op{
		{Client: 1, Node: 2, Kind: KindDelete, WorkerID: 7, Output: "http://w7/3", Call: 5, Return: 9, Result: ResultOK},
		{Client: 2, Kind: KindFree, ReservationID: "r-1", NotFound: true, Call: 6, Return: 8, Result: ResultFail, Error: "gone"},
	}
	var buf bytes.Buffer
	if err := WriteJSONL(&buf, ops); err != nil {
		t.Fatal(err)
	}
	back, err := ReadJSONL(strings.NewReader(buf.String() + "\n"))
	if err != nil || len(back) != 2 || back[0] != ops[0] || back[1] != ops[1] {
		t.Fatalf("read back %+v, %v", back, err)
	}
	if _, err := ReadJSONL(strings.NewReader("{}\nnot json\n")); err == nil || !strings.Contains(err.Error(), "line 2") {
		t.Fatalf("bad line: err = %v, want one naming line 2", err)
	}
}

func Test_classifyCatalog(t *testing.T) {
	answer := func(status int, code api.Code) error {
		return fmt.Errorf("wrapped: %w", &client.Error{Status: status, Code: code})
	}
	transport := errors.New("connection reset")
	tests := []struct {
		kind     string
		err      error
		result   string
		notFound bool
	}{
		{KindRegister, nil, ResultOK, false},
		{KindPatch, answer(404, api.CodeNotFound), ResultOK, true},
		{KindDelete, answer(404, api.CodeNotFound), ResultOK, true},
		{KindGet, answer(404, api.CodeNotFound), ResultOK, true},
		{KindRegister, answer(404, api.CodeNotFound), ResultFail, false},
		{KindRegister, answer(503, api.CodeNotLeader), ResultFail, false},
		{KindPatch, answer(503, api.CodeNoLeader), ResultFail, false},
		{KindDelete, answer(503, api.CodeShuttingDown), ResultFail, false},
		{KindRegister, answer(400, api.CodeBadRequest), ResultFail, false},
		{KindRegister, answer(503, api.CodeUnknownOutcome), ResultUnknown, false},
		{KindDelete, answer(500, api.CodeInternal), ResultUnknown, false},
		{KindPatch, transport, ResultUnknown, false},
		{KindGet, transport, ResultFail, false},
		{KindGet, answer(503, api.CodeUnknownOutcome), ResultFail, false},
	}
	for _, tt := range tests {
		result, notFound := classifyCatalog(tt.kind, tt.err)
		if result != tt.result || notFound != tt.notFound {
			t.Errorf("%s after %v: %s (not found %v), want %s (%v)", tt.kind, tt.err, result, notFound, tt.result, tt.notFound)
		}
	}
}

// Test_IsBusy: only load shedding's exact answer is busy; any other 503
// is a failed selection.
func Test_IsBusy(t *testing.T) {
	for _, tc := range []struct {
		err  error
		busy bool
	}{
		{&client.Error{Status: 503, Code: api.CodeOverloaded, Message: api.BusyMessage}, true},
		{fmt.Errorf("wrapped: %w", &client.Error{Status: 503, Code: api.CodeOverloaded, Message: api.BusyMessage}), true},
		{&client.Error{Status: 503, Code: api.CodeOverloaded, Message: "overloaded"}, false},
		{&client.Error{Status: 503, Code: api.CodeNotReady, Message: api.BusyMessage}, false},
		{&client.Error{Status: 429, Code: api.CodeOverloaded, Message: api.BusyMessage}, false},
		{errors.New("connection refused"), false},
		{nil, false},
	} {
		if got := IsBusy(tc.err); got != tc.busy {
			t.Errorf("IsBusy(%v) = %v", tc.err, got)
		}
	}
}
