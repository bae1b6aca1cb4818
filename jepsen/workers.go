package jepsen

import (
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"slices"
	"strconv"
	"time"

	"github.com/kvselect/kvselect/api"
	"github.com/kvselect/kvselect/client"
	"github.com/kvselect/kvselect/internal/childproc"
	"github.com/kvselect/kvselect/internal/poll"
	"github.com/kvselect/kvselect/kvsim"
	"github.com/kvselect/kvselect/server/proccluster"
)

// Link kinds of a node's connections to a worker: its KV event stream
// and its replay endpoint.
const (
	KindKV     = proccluster.KindKV
	KindReplay = proccluster.KindReplay
)

// SimCacheBlocks is each kvsim rank's cache: small enough that the
// workload's extra prompts evict the fixed ones, so KV events (stores,
// removals) flow all through a run, not only in its first seconds.
const SimCacheBlocks = 32

// SimTotalKVBlocks is the total_kv_blocks the harness registers for each
// kvsim worker (its cache), so that busy thresholds on decode blocks are
// checked for them (TightDecodeThreshold).
const SimTotalKVBlocks = SimCacheBlocks

// startSim starts kvsim with cfg.Workers workers and learns their
// registrations from its control API. Nothing is registered yet: the
// nodes must first be started with --kv-dial for the workers' addresses.
func (c *Cluster) startSim(ctx context.Context) error {
	ports, lns, err := childproc.ReservePorts(1)
	childproc.CloseAll(lns)
	if err != nil {
		return err
	}
	c.sim = proccluster.NewSim(proccluster.SimConfig{Bin: filepath.Join(c.cfg.Bin, "kvsim"), Dir: c.cfg.Dir, Tag: "jepsen",
		Control: fmt.Sprintf("127.0.0.1:%d", ports[0]), HTTPClient: simClient,
		Args: []string{"--workers", strconv.Itoa(c.cfg.Workers), "--model", c.cfg.Model,
			"--cache-blocks", strconv.Itoa(SimCacheBlocks), "--log-level", "info"}})
	if err := c.sim.Proc.Start(); err != nil {
		return err
	}
	c.simRegs, err = c.sim.WaitWorkers(ctx, c.cfg.Workers)
	return err
}

// registerSim registers kvsim's workers through the leader and waits
// until every live node listens to every worker rank.
func (c *Cluster) registerSim(ctx context.Context) error {
	regs := make([]api.WorkerFields, len(c.simRegs))
	for i, reg := range c.simRegs {
		reg.TotalKVBlocks = api.Ptr(uint64(SimTotalKVBlocks))
		regs[i] = reg
	}
	if err := c.Register(ctx, regs); err != nil {
		return fmt.Errorf("register kvsim's workers: %w", err)
	}
	return c.waitWorkersFollowed(ctx)
}

// waitWorkersFollowed waits until every live node's listeners for
// kvsim's workers are all active.
func (c *Cluster) waitWorkersFollowed(ctx context.Context) error {
	return poll.Until(ctx, pollEvery, "every node follows every kvsim worker", func(ctx context.Context) error {
		if err := c.sim.Exited(); err != nil {
			return poll.Fatal(err)
		}
		for _, i := range c.Live() {
			ws, err := c.Node(i).Client.Workers(ctx, client.WorkersOptions{ModelName: c.cfg.Model})
			if err != nil {
				return err
			}
			active := 0
			for _, w := range ws {
				if w.WorkerID > uint64(c.cfg.Workers) {
					continue
				}
				for _, l := range w.Listeners {
					if l.State == "active" {
						active++
					}
				}
			}
			if want := c.simRanks(); active < want {
				return fmt.Errorf("%s has %d active kvsim listeners, want %d", NodeID(i), active, want)
			}
		}
		return nil
	})
}

// SimRanks is the number of kvsim worker ranks.
func (c *Cluster) SimRanks() int { return c.simRanks() }

// simRanks is the number of kvsim worker ranks.
func (c *Cluster) simRanks() int {
	n := 0
	for _, reg := range c.simRegs {
		if reg.KVEventsEndpoints != nil {
			n += len(*reg.KVEventsEndpoints)
		}
	}
	return n
}

// Sim is the client of kvsim's control API (nil when no kvsim runs):
// prompts, resets and engine restarts of its workers.
func (c *Cluster) Sim() *kvsim.ControlClient {
	if c.sim == nil {
		return nil
	}
	return c.sim.Control
}

// SimURL is kvsim's control API base URL ("" when no kvsim runs).
func (c *Cluster) SimURL() string {
	if c.sim == nil {
		return ""
	}
	return c.sim.URL
}

// simClient bounds every call to kvsim's control API.
var simClient = &http.Client{Timeout: 2 * time.Second}

// listenerRestarts is how many engine restarts node i has counted on
// worker w's listeners.
func (c *Cluster) listenerRestarts(ctx context.Context, i int, w uint64) (uint64, error) {
	_, restarts, err := c.listenerState(ctx, i, w)
	return restarts, err
}

// listenerState is node i's view of worker w's event streams: the highest
// sequence number applied, and the engine restarts counted, over its ranks.
func (c *Cluster) listenerState(ctx context.Context, i int, w uint64) (lastSeq, restarts uint64, err error) {
	ws, err := c.Node(i).Client.Workers(ctx, client.WorkersOptions{ModelName: c.cfg.Model})
	if err != nil {
		return 0, 0, err
	}
	for _, wk := range ws {
		if wk.WorkerID != w {
			continue
		}
		for _, l := range wk.Listeners {
			lastSeq = max(lastSeq, l.LastSeq)
			restarts += l.Restarts
		}
		return lastSeq, restarts, nil
	}
	return 0, 0, fmt.Errorf("%s does not list worker %d", NodeID(i), w)
}

// AddIndexProbe adds a prompt to those IndexProbes returns.
func (c *Cluster) AddIndexProbe(p api.Prompt) {
	c.probeMu.Lock()
	defer c.probeMu.Unlock()
	c.probes = append(c.probes, p)
}

// IndexProbes are the prompts nemeses had workers serve: the index check
// compares the nodes' rows for them besides the workload's fixed set.
func (c *Cluster) IndexProbes() []api.Prompt {
	c.probeMu.Lock()
	defer c.probeMu.Unlock()
	return slices.Clone(c.probes)
}
