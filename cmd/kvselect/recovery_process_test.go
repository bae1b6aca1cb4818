package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kvselect/kvselect/api"
	"github.com/kvselect/kvselect/kvsim"
)

// The index recovery tests (SPEC §7) run real processes and an in-process
// kvsim fleet whose replay buffer holds only recReplayBuffer messages per
// rank and whose caches never evict: once more than that has been
// published, a node that started with an empty index cannot catch up by
// replay, and its dump lacks the blocks stored before.
const (
	recBS           = 16
	recReplayBuffer = 8
	recWorkers      = 2
	recRanks        = 2
)

// recFleet is a kvsim fleet registered with a process cluster.
type recFleet struct {
	t   *testing.T
	sim *kvsim.Sim
	n   int
}

func startRecFleet(t *testing.T, c *procCluster, via *procNode) *recFleet {
	t.Helper()
	sim, err := kvsim.Start(kvsim.Config{Workers: recWorkers, DPSize: recRanks, BlockSize: recBS, CacheBlocks: 4096,
		ReplayBuffer: recReplayBuffer})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sim.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := sim.Register(ctx, via.url("")); err != nil {
		t.Fatal(err)
	}
	// Serve only once every node listens to every rank: a node that
	// subscribes later than the replay buffer's worth of messages has
	// lost the first ones for good, and its index would differ.
	c.eventually("every node listens to every rank", 30*time.Second, func() error {
		for _, node := range c.nodes {
			var records []api.Worker
			if err := getJSON(node, api.PathWorkers, &records); err != nil {
				return err
			}
			active := 0
			for _, r := range records {
				for _, l := range r.Listeners {
					if l.State == api.ListenerActive {
						active++
					}
				}
			}
			if active < recWorkers*recRanks {
				return fmt.Errorf("%s: %d of %d listeners active", node.id, active, recWorkers*recRanks)
			}
		}
		return nil
	})
	return &recFleet{t: t, sim: sim}
}

// serve runs n new prompts, each on every rank of one worker in turn.
func (f *recFleet) serve(n int) {
	f.t.Helper()
	for range n {
		toks := make([]uint32, (2+f.n%3)*recBS)
		for j := range toks {
			toks[j] = uint32(f.n)<<16 | uint32(j)
		}
		w := f.sim.Workers()[f.n%recWorkers]
		f.n++
		for r := range recRanks {
			if _, err := w.Serve(r, toks); err != nil {
				f.t.Fatal(err)
			}
		}
	}
}

// caughtUp reports whether a node's dump holds every rank's last
// published sequence number as its watermark.
func (f *recFleet) caughtUp(node *procNode, d canonicalDump) error {
	for _, w := range f.sim.Workers() {
		for r := range recRanks {
			want, ok := w.LastSeq(r)
			if !ok {
				continue
			}
			key := fmt.Sprintf("%d/%d", w.ID(), r)
			if got, has := d.watermarks[key]; !has || got != want {
				return fmt.Errorf("%s: rank %s at seq %d (has %v), the engine at %d", node.id, key, got, has, want)
			}
		}
	}
	return nil
}

// canonicalDump is a node's GET /dump reduced to what the index holds,
// independent of the order it was written in: every (worker, rank, tier,
// parent, block) edge of every partition, and every rank's watermark.
type canonicalDump struct {
	edges      []string
	watermarks map[string]uint64
}

func (d canonicalDump) equal(o canonicalDump) bool {
	if !slices.Equal(d.edges, o.edges) || len(d.watermarks) != len(o.watermarks) {
		return false
	}
	for k, v := range d.watermarks {
		if w, ok := o.watermarks[k]; !ok || w != v {
			return false
		}
	}
	return true
}

func (d canonicalDump) String() string {
	return fmt.Sprintf("%d edges, watermarks %v", len(d.edges), d.watermarks)
}

// fetchDump reads node's GET /dump into its canonical form.
func fetchDump(node *procNode) (canonicalDump, error) {
	var raw map[string]struct {
		Events []struct {
			WorkerID    uint64 `json:"worker_id"`
			StorageTier string `json:"storage_tier"`
			Event       struct {
				DPRank uint32 `json:"dp_rank"`
				Data   struct {
					Stored *struct {
						ParentHash *uint64 `json:"parent_hash"`
						Blocks     []struct {
							BlockHash uint64 `json:"block_hash"`
						} `json:"blocks"`
					} `json:"stored"`
				} `json:"data"`
			} `json:"event"`
		} `json:"events"`
		Watermarks []struct {
			WorkerID uint64 `json:"worker_id"`
			DPRank   uint32 `json:"dp_rank"`
			Seq      uint64 `json:"seq"`
		} `json:"watermarks"`
	}
	d := canonicalDump{watermarks: map[string]uint64{}}
	if err := getJSON(node, api.PathDump, &raw); err != nil {
		return d, err
	}
	for key, p := range raw {
		for _, e := range p.Events {
			st := e.Event.Data.Stored
			if st == nil {
				continue
			}
			parent := "root"
			if st.ParentHash != nil {
				parent = fmt.Sprint(*st.ParentHash)
			}
			for _, b := range st.Blocks {
				d.edges = append(d.edges, fmt.Sprintf("%s %d/%d %s %s>%d", key, e.WorkerID, e.Event.DPRank, e.StorageTier, parent, b.BlockHash))
				parent = fmt.Sprint(b.BlockHash)
			}
		}
		for _, w := range p.Watermarks {
			d.watermarks[fmt.Sprintf("%d/%d", w.WorkerID, w.DPRank)] = w.Seq
		}
	}
	slices.Sort(d.edges)
	return d, nil
}

// waitSameIndex waits until every node in nodes is done recovering and
// holds the same non-empty index, caught up with every rank; while a
// node's listeners lag, the fleet publishes a little more now and then (a
// message published before a subscription lands is only noticed, and
// replayed, when the next one comes).
func (f *recFleet) waitSameIndex(c *procCluster, nodes ...*procNode) canonicalDump {
	f.t.Helper()
	var want canonicalDump
	nudged := time.Now()
	c.eventually("every node holds the same index", 60*time.Second, func() error {
		for i, node := range nodes {
			if err := notRecovering(node); err != nil {
				return err
			}
			d, err := fetchDump(node)
			if err != nil {
				return err
			}
			if err := f.caughtUp(node, d); err != nil {
				// Now and then, not on every poll: each nudge is one more
				// message per rank the replay buffer must hold.
				if time.Since(nudged) > 300*time.Millisecond {
					f.serve(recWorkers)
					nudged = time.Now()
				}
				return err
			}
			if len(d.edges) == 0 {
				return fmt.Errorf("%s: empty index", node.id)
			}
			if i == 0 {
				want = d
			} else if !d.equal(want) {
				return fmt.Errorf("%s's index (%v) differs from %s's (%v)", node.id, d, nodes[0].id, want)
			}
		}
		return nil
	})
	return want
}

// notRecovering fails while node's /ready says it is recovering its index.
func notRecovering(node *procNode) error {
	a, err := send(context.Background(), node.pollClient(), http.MethodGet, node.url(api.PathReady), "")
	if err != nil {
		return fmt.Errorf("%s: %w", node.id, err)
	}
	var ready api.Ready
	if err := json.Unmarshal(a.body, &ready); err != nil {
		return fmt.Errorf("%s: /ready %v: %w", node.id, a, err)
	}
	if ready.Recovering {
		return fmt.Errorf("%s is still recovering its index", node.id)
	}
	return nil
}

// logSince returns the lines of node's log from byte offset from on that
// contain every one of subs.
func logSince(t *testing.T, node *procNode, from int64, subs ...string) []string {
	t.Helper()
	f, err := os.Open(node.logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.Seek(from, 0); err != nil {
		t.Fatal(err)
	}
	var out []string
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
next:
	for sc.Scan() {
		for _, s := range subs {
			if !strings.Contains(sc.Text(), s) {
				continue next
			}
		}
		out = append(out, sc.Text())
	}
	return out
}

func logSize(t *testing.T, node *procNode) int64 {
	t.Helper()
	fi, err := os.Stat(node.logPath)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Size()
}

// recoveryWarnings are the WARN lines of node's index recovery since from.
func recoveryWarnings(t *testing.T, node *procNode, from int64) []string {
	return logSince(t, node, from, "level=WARN", "component=recovery")
}

// replicationBackoffCap is how many failed appends to one follower make
// hashicorp/raft's leader wait its longest (failureWait 10 ms doubled up
// to maxFailureScale 12: 10.24 s) before each further append to it.
const replicationBackoffCap = 12

// Test_RestartedFollowerRecoversAfterLeaderBackoff: a follower down long
// enough for the leader's replication backoff toward it to reach its cap
// restarts while the leader sleeps that backoff, so the leader's log
// (which names the members and the dump's partitions) reaches it only
// some ten seconds later, past the old 10 s recovery limit. It must wait
// for it and recover its index from a peer, not start empty.
//
// The restart is timed on the leader's own log: right after its
// replicationBackoffCap-th failed append to the follower, so the next
// append comes a full backoff later. --raft-commit-timeout 700ms adds
// 0.7 to 1.4 s to that (the leader's replication loop waits a random
// commit timeout before each attempt), which keeps the log late however
// slowly the follower's process starts.
func Test_RestartedFollowerRecoversAfterLeaderBackoff(t *testing.T) {
	c := startProcCluster(t, buildKvselect(t), 3, "--log-level", "debug", "--raft-commit-timeout", "700ms")
	leader := c.waitAgreement(30 * time.Second)
	fresh := map[*procNode]int64{}
	for _, node := range c.nodes {
		fresh[node] = 0
	}
	f := startRecFleet(t, c, leader)
	for range 3 {
		f.serve(recWorkers * 2)
		f.waitSameIndex(c, c.nodes...)
	}
	// A fresh cluster's ordinary start: no recovery warning.
	for node, from := range fresh {
		if w := recoveryWarnings(t, node, from); len(w) > 0 {
			t.Errorf("%s warned about recovery on a fresh start:\n%s", node.id, strings.Join(w, "\n"))
		}
	}

	var follower, other *procNode
	for _, node := range c.nodes {
		if node == leader {
			continue
		}
		if follower == nil {
			follower = node
		} else {
			other = node
		}
	}
	raftAddr := follower.RaftAddr
	leaderFrom := logSize(t, leader)
	c.kill(follower)
	// More than the replay buffers hold while it is down: only a dump
	// can bring it back.
	f.serve((recReplayBuffer + 2) * recWorkers)
	f.waitSameIndex(c, leader, other)
	c.eventually("the leader's replication backoff toward the follower reaches its cap", 90*time.Second, func() error {
		if n := len(logSince(t, leader, leaderFrom, "failed to appendEntries to", raftAddr)); n < replicationBackoffCap {
			return fmt.Errorf("%d failed appends to %s", n, follower.id)
		}
		return nil
	})
	followerFrom := logSize(t, follower)
	c.start(follower)
	defer func() {
		if t.Failed() { // the recovery's story, which DEBUG lines push out of the log tails
			for _, sub := range []string{"component=recovery", "component=ingest"} {
				for _, line := range logSince(t, follower, followerFrom, sub) {
					if !strings.Contains(line, "level=DEBUG") {
						t.Log(line)
					}
				}
			}
		}
	}()
	want := f.waitSameIndex(c, leader, other, follower)
	if got := logSince(t, follower, followerFrom, "index recovered from peer"); len(got) != 1 {
		t.Errorf("%s's log since the restart has %d lines 'index recovered from peer', want 1", follower.id, len(got))
	}
	if got := logSince(t, follower, followerFrom, "starting with an empty index"); len(got) > 0 {
		t.Errorf("%s started empty:\n%s", follower.id, strings.Join(got, "\n"))
	}
	if w := recoveryWarnings(t, follower, followerFrom); len(w) > 0 {
		t.Errorf("%s warned about recovery:\n%s", follower.id, strings.Join(w, "\n"))
	}
	if got := logSince(t, follower, followerFrom, "waiting for the leader's log"); len(got) == 0 {
		t.Logf("note: %s did not have to wait for the leader's log this time", follower.id)
	}
	t.Logf("%s recovered %v", follower.id, want)
}

// Test_WholeClusterRestartComesUp: every node killed at once and started
// again: each finds the others recovering too, so none may wait for
// another. All must end their recovery (empty, or from a peer that
// finished first), without a warning, and follow their workers again.
func Test_WholeClusterRestartComesUp(t *testing.T) {
	c := startProcCluster(t, buildKvselect(t), 3, "--log-level", "info")
	leader := c.waitAgreement(30 * time.Second)
	f := startRecFleet(t, c, leader)
	f.serve(recWorkers * 2)
	f.waitSameIndex(c, c.nodes...)

	from := map[*procNode]int64{}
	for _, node := range c.nodes {
		c.kill(node)
		from[node] = logSize(t, node)
	}
	for _, node := range c.nodes {
		c.start(node)
	}
	c.waitAgreement(30 * time.Second)
	c.eventually("every node ends its recovery", 60*time.Second, func() error {
		for _, node := range c.nodes {
			if err := notRecovering(node); err != nil {
				return err
			}
		}
		return nil
	})
	for _, node := range c.nodes {
		ended := len(logSince(t, node, from[node], "starting with an empty index")) +
			len(logSince(t, node, from[node], "index recovered from peer"))
		if ended == 0 {
			t.Errorf("%s's log does not say how its recovery ended", node.id)
		}
		if w := recoveryWarnings(t, node, from[node]); len(w) > 0 {
			t.Errorf("%s warned about recovery:\n%s", node.id, strings.Join(w, "\n"))
		}
	}
	// The workers' next messages reach every node again.
	f.serve(recWorkers * 2)
	c.eventually("every node follows its workers again", 30*time.Second, func() error {
		for _, node := range c.nodes {
			d, err := fetchDump(node)
			if err != nil {
				return err
			}
			if len(d.edges) == 0 {
				f.serve(1)
				return fmt.Errorf("%s: empty index", node.id)
			}
		}
		return nil
	})
}
