package jepsen

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/kvselect/kvselect/api"
	"github.com/kvselect/kvselect/internal/poll"
)

// RestartAfterDown is how long restart-after-60s keeps its follower down:
// far past the ~11 s of failed appends after which hashicorp/raft's leader
// waits its longest backoff (10.24 s) before each further append to it,
// so the restarted follower gets the leader's log only up to ten seconds
// after it asked for a dump (SPEC §7).
const RestartAfterDown = 60 * time.Second

// restartAfter kills (SIGKILL) a follower and keeps it down for down
// (RestartAfterDown in the suite), then restarts it on its data dir. Its
// claim is that the node recovered its KV index from a peer, whatever the
// leader's replication backoff made it wait: Heal waits until the node's
// recovery is over and proves it from the node's log since the restart
// ("index recovered from peer", and no "starting with an empty index"),
// then waits until every node answers the same /overlap_scores rows for
// the prompt the inject had a worker serve before the kill (a prompt the
// run's index check compares too). When the cluster has no kvsim workers
// there is nothing to recover and the proof is only that recovery ended
// without a warning.
type restartAfter struct {
	name string
	down time.Duration

	mu       sync.Mutex
	victim   int
	killedAt time.Time
	probe    *api.Prompt
	cycle    int
}

func (n *restartAfter) Name() string { return n.name }

func (n *restartAfter) Inject(ctx context.Context, c *Cluster) error {
	leader, err := c.WaitLeader(ctx, nil)
	if err != nil {
		return err
	}
	victim := others(c, leader)[0]
	n.mu.Lock()
	n.cycle++
	cycle := n.cycle
	n.mu.Unlock()
	detail := fmt.Sprintf("SIGKILL follower %s for %v", NodeID(victim), n.down)
	var probe *api.Prompt
	if ids := c.WorkerIDs(); len(ids) > 0 {
		// A prompt only this nemesis serves, held by every node before the
		// kill: the restarted node can only have it from a dump (kvsim's
		// replay buffer does not reach back that far once the workload
		// has run on for a minute).
		toks := make([]uint32, 64)
		for t := range toks {
			toks[t] = uint32(3_500_000_000 + cycle*1000 + t)
		}
		p := api.Prompt{ModelName: c.cfg.Model, TokenIDs: toks}
		c.AddIndexProbe(p)
		if _, err := c.Sim().Prompt(ctx, ids[cycle%len(ids)], 0, toks); err != nil {
			c.RecordEvent(n.name, PhaseInject, detail+"; serving the probe failed: "+err.Error())
			return err
		}
		wctx, cancel := context.WithTimeout(ctx, 15*time.Second)
		err := indexAgrees(wctx, c, p)
		cancel()
		if err != nil {
			c.RecordEvent(n.name, PhaseInject, detail+"; the probe never reached every node: "+err.Error())
			return err
		}
		probe = &p
	}
	n.mu.Lock()
	n.victim, n.probe = victim, probe
	n.killedAt = time.Now()
	n.mu.Unlock()
	at := c.Now()
	c.Kill(victim)
	c.RecordEventAt(at, n.name, PhaseInject, detail, victim)
	return nil
}

func (n *restartAfter) Heal(ctx context.Context, c *Cluster) error {
	n.mu.Lock()
	victim, probe, killedAt := n.victim, n.probe, n.killedAt
	n.mu.Unlock()
	_ = poll.Sleep(ctx, time.Until(killedAt.Add(n.down)))
	path := c.LogPath(victim)
	from := fileSize(path)
	err := c.Recover(ctx) // restarts the victim, waits until the cluster is healthy
	if err == nil {
		err = c.waitRecovered(ctx, victim)
	}
	if err == nil {
		err = recoveredFromPeer(path, from, probe != nil)
	}
	if err == nil && probe != nil {
		wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		err = indexAgrees(wctx, c, *probe)
		cancel()
	}
	detail := fmt.Sprintf("restart %s after %v down", NodeID(victim), time.Since(killedAt).Round(time.Second))
	if err != nil {
		detail += "; " + err.Error()
	} else if probe != nil {
		detail += "; its index recovered from a peer and agrees on the probe"
	}
	c.RecordEvent(n.name, PhaseHeal, detail)
	return err
}

// waitRecovered waits until node i's /ready no longer says recovering.
func (c *Cluster) waitRecovered(ctx context.Context, i int) error {
	return poll.Until(ctx, pollEvery, NodeID(i)+" ends its index recovery", func(ctx context.Context) error {
		r, err := c.Node(i).Client.Ready(ctx) // a 503 (no schedulable worker) is no error
		if err != nil {
			return err
		}
		if r.Recovering {
			return fmt.Errorf("%s is still recovering its index", NodeID(i))
		}
		return nil
	})
}

// indexAgrees waits until every node answers the same /overlap_scores
// rows for p, with cached blocks in them.
func indexAgrees(ctx context.Context, c *Cluster, p api.Prompt) error {
	return poll.Until(ctx, pollEvery, "every node holds the probe", func(ctx context.Context) error {
		var first string
		for i := range c.Size() {
			s, err := c.Node(i).Client.OverlapScores(ctx, p)
			if err != nil {
				return fmt.Errorf("%s: %w", NodeID(i), err)
			}
			held := false
			for _, w := range s.Workers {
				held = held || w.DeviceBlocks > 0
			}
			if !held {
				return fmt.Errorf("%s holds no block of the probe", NodeID(i))
			}
			if k := hashJSON(s); i == 0 {
				first = k
			} else if k != first {
				return fmt.Errorf("%s's rows for the probe differ from %s's", NodeID(i), NodeID(0))
			}
		}
		return nil
	})
}

// recoveredFromPeer reads a node's log from byte offset from on (its
// restart) and checks how its index recovery ended: never empty with a
// warning, and, when wantDump, from a peer's dump.
func recoveredFromPeer(path string, from int64, wantDump bool) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	if _, err := f.Seek(from, 0); err != nil {
		return err
	}
	var recovered, empty, over bool
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.Contains(line, "index recovered from peer"):
			recovered = true
		case strings.Contains(line, "starting with an empty index"):
			if strings.Contains(line, "level=WARN") || strings.Contains(line, `"level":"WARN"`) {
				return fmt.Errorf("its recovery gave up and started empty: %s", line)
			}
			empty = true
		case strings.Contains(line, "index recovery over"):
			over = true
		}
	}
	switch {
	case !over:
		return fmt.Errorf("%s shows no end of the index recovery since the restart", path)
	case wantDump && !recovered:
		return fmt.Errorf("%s shows no 'index recovered from peer' since the restart (started empty: %v)", path, empty)
	}
	return sc.Err()
}
