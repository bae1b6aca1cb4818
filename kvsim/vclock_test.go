package kvsim

import (
	"context"
	"testing"
	"time"
)

// clockRouter routes round-robin and records, for every call and every
// settle, what the replay's clock read then.
type clockRouter struct {
	clock *VirtualClock
	n     int
	log   []clockCall
}

type clockCall struct {
	what string // route, first, finish or settle
	at   time.Duration
	req  *TimedRequest
}

func (r *clockRouter) note(what string, req *TimedRequest) {
	r.log = append(r.log, clockCall{what, r.clock.Offset(), req})
}

func (r *clockRouter) Route(_ context.Context, req *TimedRequest) (int, error) {
	r.note("route", req)
	return req.Index % r.n, nil
}

func (r *clockRouter) FirstToken(_ context.Context, req *TimedRequest) error {
	r.note("first", req)
	return nil
}

func (r *clockRouter) Finished(_ context.Context, req *TimedRequest) error {
	r.note("finish", req)
	return nil
}

func (r *clockRouter) Settle(context.Context) error {
	r.note("settle", nil)
	return nil
}

// A replay's clock reads each event's time while the router handles it,
// and the router is settled at an instant before the clock leaves it.
func Test_TimedReplayVirtualClock(t *testing.T) {
	f, err := NewFleet(testEngineConfig(), 2, 1)
	if err != nil {
		t.Fatal(err)
	}
	reqs := []TraceRequest{traceReq(0, 8, 2, 1, 2), traceReq(3, 8, 1, 1, 2), traceReq(3, 12, 3, 7, 8, 9), traceReq(10, 4, 1, 1)}
	clock := NewVirtualClock(time.Time{})
	router := &clockRouter{clock: clock, n: f.Len()}
	if _, err := TimedReplay(context.Background(), f, reqs, router, TimedOptions{TraceBlockTokens: 4, Clock: clock}); err != nil {
		t.Fatal(err)
	}
	if clock.Epoch() != VirtualEpoch || !clock.Now().Equal(VirtualEpoch.Add(clock.Offset())) {
		t.Fatalf("clock epoch %s, now %s at offset %s", clock.Epoch(), clock.Now(), clock.Offset())
	}
	var last time.Duration
	settled := true
	for i, c := range router.log {
		if c.at < last {
			t.Fatalf("call %d (%s) at %s, after a call at %s: the clock went back", i, c.what, c.at, last)
		}
		if c.at > last && !settled {
			t.Fatalf("call %d (%s) at %s: no settle at %s after the last call there", i, c.what, c.at, last)
		}
		last = c.at
		var want time.Duration
		switch c.what {
		case "settle":
			settled = true
			continue
		case "route":
			want = c.req.Arrival
		case "first":
			want = c.req.FirstToken
		case "finish":
			want = c.req.Done
		}
		settled = false
		if c.at != want {
			t.Errorf("%s of request %d: clock at %s, want %s", c.what, c.req.Index, c.at, want)
		}
	}
	if clock.Offset() != last {
		t.Fatalf("clock ends at %s, the last call was at %s", clock.Offset(), last)
	}
}

// The clock never goes back, whoever asks.
func Test_VirtualClockMonotonic(t *testing.T) {
	c := NewVirtualClock(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
	c.advance(5 * time.Second)
	c.advance(2 * time.Second)
	if c.Offset() != 5*time.Second || !c.Now().Equal(time.Date(2030, 1, 1, 0, 0, 5, 0, time.UTC)) {
		t.Fatalf("offset %s, now %s", c.Offset(), c.Now())
	}
}
