package benchutil

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// Request builds one HTTP request of a load run; it is called once per
// request, from many goroutines.
type Request func(ctx context.Context) (*http.Request, error)

// LoadResult is what one load run measured.
type LoadResult struct {
	Requests int           // answered with the expected status
	Errors   int           // transport errors and other statuses
	Elapsed  time.Duration // from the first send to the last answer
	// Latencies of the answered requests, sorted. In an open-loop run a
	// request that found its sender still busy when it was due counts
	// from then, not from when the sender got to it, so a stalled server
	// cannot hide its queue (coordinated omission).
	Latencies []time.Duration
	// Behind counts open-loop requests sent more than a millisecond after
	// they were due: the generator itself could not keep the rate.
	Behind int
}

// PerSecond is the rate of answered requests.
func (r LoadResult) PerSecond() float64 {
	if r.Elapsed <= 0 {
		return 0
	}
	return float64(r.Requests) / r.Elapsed.Seconds()
}

// Percentile returns the latency below which a fraction p of requests
// fall (0 without any).
func (r LoadResult) Percentile(p float64) time.Duration {
	if len(r.Latencies) == 0 {
		return 0
	}
	return r.Latencies[int(p*float64(len(r.Latencies)-1))]
}

func (r LoadResult) String() string {
	return fmt.Sprintf("%.0f req/s, p50 %v, p99 %v, %d errors", r.PerSecond(),
		r.Percentile(0.50).Round(time.Microsecond), r.Percentile(0.99).Round(time.Microsecond), r.Errors)
}

// NewLoadClient returns an HTTP client that keeps up to conns connections
// to one host alive, as a load generator needs.
func NewLoadClient(conns int) *http.Client {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConns, tr.MaxIdleConnsPerHost, tr.MaxConnsPerHost = conns, conns, conns
	// A request body that fits the write buffer is copied into it;
	// larger ones go through a 32 KiB buffer allocated per request, load
	// the generator adds to the machine it measures.
	tr.WriteBufferSize = 64 << 10
	return &http.Client{Transport: tr, Timeout: 10 * time.Second}
}

// ClosedLoop runs conns senders for d, each sending its next request as
// soon as the previous one is answered (as wrk does): the server's
// throughput at that concurrency.
func ClosedLoop(ctx context.Context, hc *http.Client, conns int, d time.Duration, want int, req Request) (LoadResult, error) {
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	var c collector
	var wg sync.WaitGroup
	start := time.Now()
	for range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var lat []time.Duration
			for ctx.Err() == nil {
				t0 := time.Now()
				err := send(ctx, hc, want, req)
				if ctx.Err() != nil {
					break // cut short by the end of the run
				}
				if err != nil {
					c.fail(err)
					continue
				}
				lat = append(lat, time.Since(t0))
			}
			c.merge(lat, 0)
		}()
	}
	wg.Wait()
	return c.result(start)
}

// OpenLoop sends requests at rate per second for d, whatever the answers
// do, from up to senders goroutines, and times each from when it was due.
func OpenLoop(ctx context.Context, hc *http.Client, rate float64, senders int, d time.Duration, want int, req Request) (LoadResult, error) {
	if rate <= 0 {
		return LoadResult{}, errors.New("benchutil: open loop needs a rate > 0")
	}
	interval := time.Duration(float64(time.Second) / rate)
	total := int(d / interval)
	var next atomic.Int64 // index of the next request to send
	var c collector
	var wg sync.WaitGroup
	start := time.Now()
	for range senders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var lat []time.Duration
			behind := 0
			for {
				i := next.Add(1) - 1
				if i >= int64(total) || ctx.Err() != nil {
					break
				}
				// A request counts from when it was due if this sender
				// was still busy then (the server kept it), but from when
				// the sender woke if it slept: a timer firing late is the
				// generator's delay, not the server's (Go's timers can
				// oversleep by up to a millisecond on an idle machine).
				due := start.Add(time.Duration(i) * interval)
				from := due
				if wait := time.Until(due); wait > 0 {
					time.Sleep(wait)
					from = time.Now()
				} else if wait < -time.Millisecond {
					behind++
				}
				if err := send(ctx, hc, want, req); err != nil {
					c.fail(err)
					continue
				}
				lat = append(lat, time.Since(from))
			}
			c.merge(lat, behind)
		}()
	}
	wg.Wait()
	return c.result(start)
}

// collector gathers what the senders of one run measured.
type collector struct {
	mu    sync.Mutex
	res   LoadResult
	first error
}

// fail counts a failed request, keeping the first error.
func (c *collector) fail(err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.res.Errors++
	if c.first == nil {
		c.first = err
	}
}

// merge adds one sender's latencies and late sends.
func (c *collector) merge(lat []time.Duration, behind int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.res.Latencies = append(c.res.Latencies, lat...)
	c.res.Behind += behind
}

// result closes the run that began at start.
func (c *collector) result(start time.Time) (LoadResult, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.res.Elapsed = time.Since(start)
	c.res.Requests = len(c.res.Latencies)
	slices.Sort(c.res.Latencies)
	return c.res, c.first
}

func send(ctx context.Context, hc *http.Client, want int, req Request) error {
	r, err := req(ctx)
	if err != nil {
		return err
	}
	resp, err := hc.Do(r)
	if err != nil {
		return err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != want {
		return fmt.Errorf("%s %s: status %d, want %d", r.Method, r.URL.Path, resp.StatusCode, want)
	}
	return nil
}
