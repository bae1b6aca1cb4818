package zmqsync

import (
	"context"
	"encoding/binary"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/go-zeromq/zmq4"

	"github.com/kvselect/kvselect/internal/authtoken"
	"github.com/kvselect/kvselect/internal/poll"
	"github.com/kvselect/kvselect/scheduler/replica"
)

// BenchmarkPublishToApply is replica sync in process: from Publish on one
// syncer to Apply on another (a stub that records the time; no scheduler,
// no HTTP), over loopback ZMQ, at a steady rate of admissions with 128
// sequence hashes each (a 2 k-token prompt). It is the transport's share
// of SPEC §12's end-to-end figure (server's BenchmarkReplicaSyncHTTP: a
// booking over HTTP on one node until GET /reservations/{id} shows it on
// another), reported beside it under this name. The baseline in the same
// run is a bare zmq4 PUB → SUB of the same bytes at the same rate: the
// transport's own floor. replica-sync-auth is the same with a token: every
// message MAC'd and verified.
//
//	go test -run '^$' -bench PublishToApply -benchtime 1x ./zmqsync/
func BenchmarkPublishToApply(b *testing.B) {
	for _, rate := range []int{1000, 10000} {
		n := 2 * rate // two seconds of traffic
		b.Run(fmt.Sprintf("rate=%d/replica-sync", rate), func(b *testing.B) {
			for range b.N {
				reportDelays(b, syncDelays(b, rate, n, ""))
			}
		})
		b.Run(fmt.Sprintf("rate=%d/replica-sync-auth", rate), func(b *testing.B) {
			for range b.N {
				reportDelays(b, syncDelays(b, rate, n, "bench-token"))
			}
		})
		b.Run(fmt.Sprintf("rate=%d/bare-zmq", rate), func(b *testing.B) {
			for range b.N {
				reportDelays(b, bareDelays(b, rate, n))
			}
		})
	}
}

func benchEvent(i int) replica.Event {
	ev := replica.Event{Kind: replica.KindAdmission, ReservationID: fmt.Sprintf("bench-%08d", i), Model: "model", Tenant: "default",
		WorkerID: uint64(i % 8), BlockSize: 16, SequenceHashes: make([]uint64, 128), Chained: true,
		ISL: 2048, PrefillTokens: 2048, Admitted: time.Now()}
	for j := range ev.SequenceHashes {
		ev.SequenceHashes[j] = uint64(i)<<20 | uint64(j)
	}
	return ev
}

// pace calls send(i) for i in [0, n) at rate per second, in 1 ms steps.
func pace(rate, n int, send func(i int)) {
	perStep := max(rate/1000, 1)
	start := time.Now()
	for i := 0; i < n; {
		for k := 0; k < perStep && i < n; k++ {
			send(i)
			i++
		}
		next := start.Add(time.Duration(i/perStep) * time.Millisecond)
		time.Sleep(time.Until(next))
	}
}

func syncDelays(b *testing.B, rate, n int, token string) []time.Duration {
	sent := make([]time.Time, n)
	delays := make([]time.Duration, 0, n)
	var mu sync.Mutex
	done := make(chan struct{})
	quiet := slog.New(slog.DiscardHandler)
	apply := func(_ string, ev *replica.Event) string {
		var i int
		if k, _ := fmt.Sscanf(ev.ReservationID, "bench-%d", &i); k != 1 || i < 0 || i >= n {
			return "" // a probe
		}
		mu.Lock()
		defer mu.Unlock()
		delays = append(delays, time.Since(sent[i]))
		if len(delays) == n {
			close(done)
		}
		return ""
	}
	a, err := Start(Config{NodeID: "a", Listen: "tcp://127.0.0.1:0", Apply: func(string, *replica.Event) string { return "" },
		Auth: authtoken.NewHolder(token), Logger: quiet})
	if err != nil {
		b.Fatal(err)
	}
	defer a.Close()
	recv, err := Start(Config{NodeID: "b", Listen: "tcp://127.0.0.1:0", Peers: []string{a.Endpoint()}, Apply: apply,
		Auth: authtoken.NewHolder(token), Logger: quiet})
	if err != nil {
		b.Fatal(err)
	}
	defer recv.Close()
	inCluster(a, recv)
	waitLive(b, func() { a.Publish(replica.Event{Kind: replica.KindFree, ReservationID: "probe-1"}) }, func() bool { return recv.Peers()[0].Events > 0 })
	b.ResetTimer()
	pace(rate, n, func(i int) {
		ev := benchEvent(i)
		sent[i] = time.Now()
		a.Publish(ev)
	})
	waitDone(b, done, func() int { mu.Lock(); defer mu.Unlock(); return len(delays) }, n)
	b.StopTimer()
	return delays
}

func bareDelays(b *testing.B, rate, n int) []time.Duration {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	pub := zmq4.NewPub(ctx)
	if err := pub.Listen("tcp://127.0.0.1:0"); err != nil {
		b.Fatal(err)
	}
	defer pub.Close()
	sub := zmq4.NewSub(ctx)
	defer sub.Close()
	if err := sub.SetOption(zmq4.OptionSubscribe, ""); err != nil {
		b.Fatal(err)
	}
	if err := sub.Dial("tcp://" + pub.Addr().String()); err != nil {
		b.Fatal(err)
	}
	sent := make([]time.Time, n)
	delays := make([]time.Duration, 0, n)
	var mu sync.Mutex
	done := make(chan struct{})
	probes := 0
	go func() {
		for {
			msg, err := sub.Recv()
			if err != nil {
				return
			}
			i := int(binary.BigEndian.Uint64(msg.Frames[1]))
			mu.Lock()
			if i < 0 || i >= n {
				probes++
			} else {
				delays = append(delays, time.Since(sent[i]))
				if len(delays) == n {
					close(done)
				}
			}
			mu.Unlock()
		}
	}()
	probe := func(i uint64) zmq4.Msg {
		return zmq4.NewMsgFrom([]byte(Topic), binary.BigEndian.AppendUint64(nil, i))
	}
	waitLive(b, func() { _ = pub.Send(probe(1 << 62)) }, func() bool { mu.Lock(); defer mu.Unlock(); return probes > 0 })
	b.ResetTimer()
	pace(rate, n, func(i int) {
		ev := benchEvent(i)
		payload := AppendMessage(binary.BigEndian.AppendUint64(nil, uint64(i)), &Message{Version: PreviousVersion, Origin: "a", Events: []replica.Event{ev}})
		sent[i] = time.Now()
		_ = pub.Send(zmq4.NewMsgFrom([]byte(Topic), payload[:8], payload[8:]))
	})
	waitDone(b, done, func() int { mu.Lock(); defer mu.Unlock(); return len(delays) }, n)
	b.StopTimer()
	return delays
}

// waitLive probes until the subscription is live (PUB/SUB drops what is
// sent before).
func waitLive(b *testing.B, probe func(), live func() bool) {
	poll.Eventually(b, 10*time.Second, "the subscription to come up", func() error {
		if live() {
			return nil
		}
		probe()
		return errNotYet
	})
}

func waitDone(b *testing.B, done <-chan struct{}, got func() int, n int) {
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		b.Fatalf("%d of %d events arrived", got(), n)
	}
}

func reportDelays(b *testing.B, d []time.Duration) {
	slices.Sort(d)
	q := func(p float64) float64 { return float64(d[int(p*float64(len(d)-1))].Microseconds()) }
	b.ReportMetric(q(0.50), "p50-us")
	b.ReportMetric(q(0.99), "p99-us")
	b.ReportMetric(q(1), "max-us")
}
