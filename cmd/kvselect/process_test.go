package main

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kvselect/kvselect/api"
)

// Test_KillLeaderDuringWrites runs three real kvselect processes, SIGKILLs
// the leader while clients write the catalog through every node and
// select on every node, and proves that:
//   - the survivors elect a new leader and followers forward writes to it
//     (writes keep being acknowledged after the kill);
//   - selection never fails on a live node, before or after the kill,
//     because it needs no leader;
//   - no acknowledged write is lost: once the killed node restarts from
//     its data dir, every node's local catalog holds every acknowledged
//     worker, and all nodes hold the identical set (writes whose outcome
//     was unknown may be present or absent, but the same everywhere);
//   - SIGTERM shuts every node down gracefully with exit status 0.
func Test_KillLeaderDuringWrites(t *testing.T) {
	const (
		acksBeforeKill = 20
		acksAfterKill  = 20
	)
	c := startFastFailover(t, "warn")
	began := time.Now()
	c.waitAgreement(30 * time.Second)
	t.Logf("cluster formed in %v", time.Since(began).Round(time.Millisecond))

	mustRegister(t, c, 1000)
	c.eventually("every node is ready", 10*time.Second, func() error {
		for _, node := range c.nodes {
			var ready struct{}
			if err := getJSON(node, "/ready", &ready); err != nil {
				return err
			}
		}
		return nil
	})

	tr := startTraffic(t, c)
	c.eventually(fmt.Sprintf("%d writes are acknowledged", acksBeforeKill), 20*time.Second, func() error {
		if n := tr.acked.Load(); n < acksBeforeKill {
			return fmt.Errorf("%d acknowledged", n)
		}
		return nil
	})

	// Selection on the victim stops just before the kill: from then on its
	// requests fail by design, and every other one must succeed.
	victim := c.waitAgreement(10 * time.Second)
	tr.selectors[c.index(victim)].stop()
	c.kill(victim)
	killedAt, ackedAtKill := time.Now(), tr.acked.Load()
	t.Logf("killed leader %s after %d acknowledged writes", victim.id, ackedAtKill)

	c.eventually(fmt.Sprintf("%d more writes are acknowledged after the kill", acksAfterKill), 60*time.Second, func() error {
		if n := tr.acked.Load() - ackedAtKill; n < acksAfterKill {
			return fmt.Errorf("only %d acknowledged since the kill: no new leader, or forwarding fails", n)
		}
		return nil
	})
	t.Logf("%d more writes acknowledged %v after the kill", acksAfterKill, time.Since(killedAt).Round(time.Millisecond))
	acked, selects := tr.stop()
	t.Logf("%d writes acknowledged, %d with unknown outcome", len(acked), tr.unknown.Load())

	for i, node := range c.nodes {
		log := selects[i] // the victim's ends at the kill
		t.Logf("%s: %d selections succeeded, %d failed", node.id, log.ok, len(log.failures))
		if log.ok == 0 {
			t.Errorf("%s served no selection", node.id)
		}
		for j, f := range log.failures {
			if j == 5 {
				t.Errorf("%s: ... and %d more failed selections", node.id, len(log.failures)-j)
				break
			}
			t.Errorf("%s: selection failed %v relative to the kill: %s", node.id, f.at.Sub(killedAt).Round(time.Millisecond), f.err)
		}
	}

	c.start(victim)
	c.waitAgreement(30 * time.Second)
	want := append([]uint64{1000}, acked...)
	c.eventually("every node holds every acknowledged worker and the same catalog", 30*time.Second, func() error {
		return sameCatalogWith(c, want)
	})
	t.Logf("%d acknowledged writes present on all nodes after %s restarted", len(acked), victim.id)

	c.terminateAll(15 * time.Second)
	t.Logf("total %v", time.Since(began).Round(time.Millisecond))
}

// workerJSON is a schedulable worker of model "m".
func workerJSON(id uint64) string {
	return fmt.Sprintf(`{"worker_id": %d, "model_name": "m", "endpoint": "http://w", "block_size": 16,
		"kv_events_endpoint": "tcp://127.0.0.1:1"}`, id)
}

const selectJSON = `{"model_name": "m", "token_ids": [1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17]}`

// notAcknowledged reports whether a 503 with this code leaves a catalog
// write unacknowledged but worth sending again: nothing was written
// (api.Code.NothingWritten), or the outcome is unknown. Either way the
// test may not count the write as acknowledged.
func notAcknowledged(code string) bool {
	c := api.Code(code)
	return c.NothingWritten() || c == api.CodeUnknownOutcome
}

// mustRegister registers worker id through the first node, retrying
// answers whose outcome is unknown.
func mustRegister(t *testing.T, c *procCluster, id uint64) {
	t.Helper()
	client := &http.Client{Timeout: 5 * time.Second}
	c.eventually(fmt.Sprintf("worker %d is registered", id), 20*time.Second, func() error {
		a, err := send(context.Background(), client, http.MethodPost, c.nodes[0].url("/workers"), workerJSON(id))
		switch {
		case err != nil:
			return err
		case a.status == http.StatusCreated:
			return nil
		case a.status == http.StatusServiceUnavailable && notAcknowledged(a.code()):
			return fmt.Errorf("POST /workers: %v", a)
		}
		t.Fatalf("POST /workers: %v", a)
		return nil
	})
}

// sameCatalogWith checks that every node's local catalog holds the ids in
// want and that all nodes hold the same ids.
func sameCatalogWith(c *procCluster, want []uint64) error {
	var first []uint64
	for _, node := range c.nodes {
		ids, err := localWorkerIDs(node)
		if err != nil {
			return err
		}
		slices.Sort(ids)
		var missing []uint64
		for _, id := range want {
			if _, found := slices.BinarySearch(ids, id); !found {
				missing = append(missing, id)
			}
		}
		if len(missing) > 0 {
			return fmt.Errorf("%s lacks %d acknowledged workers, e.g. %v", node.id, len(missing), missing[:min(5, len(missing))])
		}
		if first == nil {
			first = ids
		} else if !slices.Equal(ids, first) {
			return fmt.Errorf("%s holds %d workers, %s holds %d (or different ones)", node.id, len(ids), c.nodes[0].id, len(first))
		}
	}
	return nil
}

// traffic is the concurrent load during the fault: writers that register
// workers through every node, and one selector per node.
type traffic struct {
	cancel    context.CancelFunc
	writers   sync.WaitGroup
	acked     atomic.Int64 // acknowledged writes so far, for progress checks
	unknown   atomic.Int64 // writes whose outcome the client never learned
	ackedIDs  [][]uint64   // per writer; written by it, read after writers.Wait
	selectors []*selector
}

// startTraffic starts two writers and a selector per node. The test stops
// it with stop; a cleanup stops it too if the test ends early.
func startTraffic(t *testing.T, c *procCluster) *traffic {
	const writers = 2
	ctx, cancel := context.WithCancel(context.Background())
	tr := &traffic{cancel: cancel, ackedIDs: make([][]uint64, writers)}
	var urls []string
	for _, node := range c.nodes {
		urls = append(urls, node.url(""))
		tr.selectors = append(tr.selectors, startSelector(node.url("")))
	}
	for w := range writers {
		tr.writers.Add(1)
		go func() {
			defer tr.writers.Done()
			tr.ackedIDs[w] = tr.write(ctx, t, urls, w, uint64(w+1)*1_000_000)
		}()
	}
	t.Cleanup(func() { tr.stop() })
	return tr
}

// stop ends all traffic and returns the acknowledged worker ids and each
// node's selection log.
func (tr *traffic) stop() (acked []uint64, selects []selectLog) {
	tr.cancel()
	tr.writers.Wait()
	for _, ids := range tr.ackedIDs {
		acked = append(acked, ids...)
	}
	for _, s := range tr.selectors {
		selects = append(selects, s.stop())
	}
	return acked, selects
}

// write registers workers firstID, firstID+1, ... until ctx ends, sending
// the i-th to urls[(offset+i) % len(urls)] and returning the ids answered
// 201. An error or an unknown-outcome 503 leaves a write unacknowledged;
// any other answer fails the test.
func (tr *traffic) write(ctx context.Context, t *testing.T, urls []string, offset int, firstID uint64) []uint64 {
	client := &http.Client{Timeout: 5 * time.Second}
	var acked []uint64
	for i := 0; ctx.Err() == nil; i++ {
		id, url := firstID+uint64(i), urls[(offset+i)%len(urls)]
		a, err := send(ctx, client, http.MethodPost, url+"/workers", workerJSON(id))
		switch {
		case err != nil: // refused, reset, timed out or stopped: outcome unknown
			tr.unknown.Add(1)
		case a.status == http.StatusCreated:
			acked = append(acked, id)
			tr.acked.Add(1)
		case a.status == http.StatusServiceUnavailable && notAcknowledged(a.code()):
			tr.unknown.Add(1)
		default:
			t.Errorf("POST /workers worker %d via %s: %v", id, url, a)
			return acked
		}
	}
	return acked
}

// selector loops POST /select on one node.
type selector struct {
	cancel context.CancelFunc
	done   chan struct{}
	log    selectLog // written by the loop, read after done
}

// selectLog is what a selector saw.
type selectLog struct {
	ok       int
	failures []selectFailure
}

type selectFailure struct {
	at  time.Time
	err string
}

// selectPace spaces a selector's requests so that three selectors leave
// CPU for the nodes' Raft timers on a small machine.
const selectPace = 5 * time.Millisecond

func startSelector(baseURL string) *selector {
	ctx, cancel := context.WithCancel(context.Background())
	s := &selector{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(s.done)
		client := &http.Client{Timeout: 5 * time.Second}
		tick := time.NewTicker(selectPace)
		defer tick.Stop()
		for {
			a, err := send(ctx, client, http.MethodPost, baseURL+"/select", selectJSON)
			if ctx.Err() != nil {
				return // stopped mid-request: says nothing about the node
			}
			switch {
			case err != nil:
				s.log.failures = append(s.log.failures, selectFailure{time.Now(), err.Error()})
			case a.status != http.StatusOK || !strings.Contains(string(a.body), `"worker_id"`):
				s.log.failures = append(s.log.failures, selectFailure{time.Now(), a.String()})
			default:
				s.log.ok++
			}
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	}()
	return s
}

// stop ends the loop and returns its log; calling it again is harmless.
func (s *selector) stop() selectLog {
	s.cancel()
	<-s.done
	return s.log
}
