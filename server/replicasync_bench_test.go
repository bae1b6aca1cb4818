package server_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kvselect/kvselect/api"
	"github.com/kvselect/kvselect/internal/benchutil"
	"github.com/kvselect/kvselect/server"
	"github.com/kvselect/kvselect/server/servertest"
)

// BenchmarkReplicaSyncHTTP is SPEC §12's replica-sync figure, end to end:
// a booking made over HTTP on one node (POST /reservations, 128 sequence
// hashes: a 2 k-token prompt, one of 256 documents as in
// BenchmarkSelectHTTP) until it is visible on another node (GET
// /reservations/{id} there), at a steady 1 000 bookings/s, on a 3-node
// in-process cluster over loopback HTTP and ZMQ with the production
// anti-entropy period. Each booking counts from when it was due (a sender
// still busy then does not hide the delay); every 4th is sampled: once its
// POST is answered, one prober polls the other node and one the booking
// node itself, each with back-to-back GETs, until the booking shows. The
// booking node's own figure is the baseline: the same HTTP round trips
// without replica sync, so the difference is what replica sync adds.
//
//	go test -run '^$' -bench ReplicaSyncHTTP -benchtime 1x ./server/
func BenchmarkReplicaSyncHTTP(b *testing.B) {
	const (
		rate    = 1000
		runFor  = 3 * time.Second
		every   = 4 // one booking in every sampled
		workers = 8
		senders = 4
	)
	c := servertest.StartCluster(b, 3, func(_ int, cfg *server.Config) {
		cfg.ReplicaSync = &server.ReplicaSyncConfig{Listen: "tcp://127.0.0.1:0"} // the default 1 s period
	})
	nodes := c.Live()
	home, other := nodes[0], nodes[1]
	hc := benchutil.NewLoadClient(2 * senders)
	for w := 1; w <= workers; w++ {
		body := fmt.Sprintf(`{"worker_id": %d, "model_name": "m", "endpoint": "http://w", "block_size": 16,
			"kv_events_endpoint": "tcp://127.0.0.1:1"}`, w)
		if status, err := do(hc, http.MethodPost, c.Leader().URL()+api.PathWorkers, body); err != nil || status != http.StatusCreated {
			b.Fatalf("register worker %d: %d %v", w, status, err)
		}
	}
	hashes := make([]string, 128)
	booking := func(id string, i int) string {
		for j := range hashes {
			hashes[j] = fmt.Sprint(uint64(i%256)<<20 | uint64(j))
		}
		return fmt.Sprintf(`{"reservation_id": %q, "model_name": "m", "worker_id": %d, "dp_rank": 0, "isl_tokens": 2048,
			"effective_prefill_tokens": 2048, "sequence_hashes": [%s]}`, id, 1+i%workers, strings.Join(hashes, ","))
	}
	// The run starts once a booking on home shows on other: the catalog
	// and the subscription are both there.
	servertest.Eventually(b, "a booking on one node shows on the other", func() error {
		id := fmt.Sprint("probe-", time.Now().UnixNano())
		if status, err := do(hc, http.MethodPost, home.URL()+api.PathReservations, booking(id, 0)); err != nil || status != http.StatusCreated {
			return fmt.Errorf("book: %d %v", status, err)
		}
		if _, err := visible(context.Background(), hc, other.URL()+api.ReservationPath(id), 500*time.Millisecond); err != nil {
			return err
		}
		return nil
	})

	for run := range b.N {
		var (
			mu                     sync.Mutex
			remote, local, answers []time.Duration
			probes                 sync.WaitGroup
			failed                 atomic.Value
			behind                 atomic.Int64
		)
		fail := func(err error) { failed.CompareAndSwap(nil, err) }
		interval := time.Second / rate
		total := int(runFor / interval)
		var next atomic.Int64
		bodies := make([]string, total)
		for i := range bodies {
			bodies[i] = booking(fmt.Sprintf("bench-%d-%06d", run, i), i)
		}
		b.ResetTimer()
		start := time.Now()
		var senderWG sync.WaitGroup
		for range senders {
			senderWG.Add(1)
			go func() {
				defer senderWG.Done()
				for {
					i := int(next.Add(1) - 1)
					if i >= total {
						return
					}
					due := start.Add(time.Duration(i) * interval)
					from := due
					if wait := time.Until(due); wait > 0 {
						time.Sleep(wait)
						from = time.Now() // a timer firing late is the generator's delay
					} else if wait < -time.Millisecond {
						behind.Add(1)
					}
					id := fmt.Sprintf("bench-%d-%06d", run, i)
					if status, err := do(hc, http.MethodPost, home.URL()+api.PathReservations, bodies[i]); err != nil || status != http.StatusCreated {
						fail(fmt.Errorf("book %s: %d %w", id, status, err))
						return
					}
					answered := time.Since(from)
					mu.Lock()
					answers = append(answers, answered)
					mu.Unlock()
					if i%every != 0 {
						continue
					}
					for _, to := range []struct {
						url string
						out *[]time.Duration
					}{{other.URL(), &remote}, {home.URL(), &local}} {
						probes.Add(1)
						go func() {
							defer probes.Done()
							ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
							defer cancel()
							if _, err := visible(ctx, hc, to.url+api.ReservationPath(id), 0); err != nil {
								fail(err)
								return
							}
							d := time.Since(from)
							mu.Lock()
							*to.out = append(*to.out, d)
							mu.Unlock()
						}()
					}
				}
			}()
		}
		senderWG.Wait()
		probes.Wait()
		b.StopTimer()
		if err, _ := failed.Load().(error); err != nil {
			b.Fatal(err)
		}
		pct := func(d []time.Duration, p float64) float64 {
			slices.Sort(d)
			return float64(d[int(p*float64(len(d)-1))].Microseconds())
		}
		b.ReportMetric(pct(remote, 0.50), "visible-p50-us")
		b.ReportMetric(pct(remote, 0.99), "visible-p99-us")
		b.ReportMetric(pct(remote, 1), "visible-max-us")
		b.ReportMetric(pct(local, 0.50), "local-p50-us")
		b.ReportMetric(pct(local, 0.99), "local-p99-us")
		b.ReportMetric(pct(answers, 0.99), "booking-p99-us")
		b.ReportMetric(float64(len(remote)), "samples")
		b.ReportMetric(float64(behind.Load()), "late-sends")
		b.ReportMetric(float64(total)/time.Since(start).Seconds(), "bookings/s")
	}
}

// visible polls url (GET) until it answers 200, back to back, or every
// pause; 404 means not yet.
func visible(ctx context.Context, hc *http.Client, url string, giveUp time.Duration) (int, error) {
	if giveUp > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, giveUp)
		defer cancel()
	}
	for polls := 1; ; polls++ {
		status, err := do(hc, http.MethodGet, url, "")
		switch {
		case err != nil:
			return polls, err
		case status == http.StatusOK:
			return polls, nil
		case status != http.StatusNotFound:
			return polls, fmt.Errorf("GET %s: %d", url, status)
		case ctx.Err() != nil:
			return polls, errors.New("GET " + url + ": still 404")
		}
	}
}

// do sends one request and drains the answer.
func do(hc *http.Client, method, url, body string) (int, error) {
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		return 0, err
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := hc.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode, nil
}
