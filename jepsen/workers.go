package jepsen

import (
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/kvselect/kvselect/api"
	"github.com/kvselect/kvselect/client"
	"github.com/kvselect/kvselect/internal/childproc"
	"github.com/kvselect/kvselect/internal/faultproxy"
	"github.com/kvselect/kvselect/internal/poll"
	"github.com/kvselect/kvselect/internal/zmqx"
	"github.com/kvselect/kvselect/kvsim"
)

// Link kinds of a node's connections to a worker: its KV event stream
// and its replay endpoint.
const (
	KindKV     = "kv"
	KindReplay = "replay"
)

// SimCacheBlocks is each kvsim rank's cache: small enough that the
// workload's extra prompts evict the fixed ones, so KV events (stores,
// removals) flow all through a run, not only in its first seconds.
const SimCacheBlocks = 32

// SimTotalKVBlocks is the total_kv_blocks the harness registers for each
// kvsim worker (its cache), so that busy thresholds on decode blocks are
// checked for them (TightDecodeThreshold).
const SimTotalKVBlocks = SimCacheBlocks

// workerAddr is one TCP address a node dials for a worker rank.
type workerAddr struct {
	worker uint64
	rank   uint32
	kind   string // KindKV or KindReplay
	addr   string // host:port as registered
}

// startSim starts kvsim with cfg.Workers workers and learns their
// registrations from its control API. Nothing is registered yet: the
// nodes must first be started with --kv-dial for the workers' addresses.
func (c *Cluster) startSim(ctx context.Context, controlPort int) error {
	control := fmt.Sprintf("127.0.0.1:%d", controlPort)
	c.simControl = "http://" + control
	c.simCtl = &kvsim.ControlClient{BaseURL: c.simControl, HTTP: simClient}
	c.sim = &childproc.Proc{Tag: "jepsen", Name: "kvsim", Path: filepath.Join(c.cfg.Bin, "kvsim"), LogPath: filepath.Join(c.cfg.Dir, "kvsim.log"),
		Args: []string{"--workers", strconv.Itoa(c.cfg.Workers), "--model", c.cfg.Model, "--control", control,
			"--cache-blocks", strconv.Itoa(SimCacheBlocks), "--log-level", "info"}}
	if err := c.sim.Start(); err != nil {
		return err
	}
	return poll.Until(ctx, pollEvery, "kvsim lists its workers", func(ctx context.Context) error {
		if err := c.sim.ExitedOnItsOwn(); err != nil {
			return poll.Fatal(fmt.Errorf("kvsim exited: %v (see %s)", err, c.sim.LogPath))
		}
		regs, err := c.simCtl.Workers(ctx)
		if err != nil {
			return err
		}
		if len(regs) != c.cfg.Workers {
			return fmt.Errorf("kvsim lists %d workers, want %d", len(regs), c.cfg.Workers)
		}
		c.simRegs = regs
		return nil
	})
}

// simAddrs are the addresses a node dials for kvsim's workers: each
// rank's event stream and, when the worker has one, its replay endpoint.
func (c *Cluster) simAddrs() ([]workerAddr, error) {
	var out []workerAddr
	for _, reg := range c.simRegs {
		if reg.WorkerID == nil || reg.KVEventsEndpoints == nil {
			return nil, fmt.Errorf("kvsim registration without worker_id or kv_events_endpoints: %+v", reg)
		}
		eps := *reg.KVEventsEndpoints
		ranks := make([]uint32, 0, len(eps))
		for r := range eps {
			ranks = append(ranks, r)
		}
		slices.Sort(ranks)
		for _, r := range ranks {
			eps := map[string]string{KindKV: eps[r]}
			if reg.ReplayEndpoint != nil && *reg.ReplayEndpoint != "" {
				ep, err := zmqx.RankEndpoint(*reg.ReplayEndpoint, r)
				if err != nil {
					return nil, err
				}
				eps[KindReplay] = ep
			}
			for _, kind := range []string{KindKV, KindReplay} {
				ep, ok := eps[kind]
				if !ok {
					continue
				}
				addr, ok := strings.CutPrefix(ep, "tcp://")
				if !ok {
					return nil, fmt.Errorf("worker %d endpoint %q is not tcp", *reg.WorkerID, ep)
				}
				out = append(out, workerAddr{worker: *reg.WorkerID, rank: r, kind: kind, addr: addr})
			}
		}
	}
	return out, nil
}

// addWorkerLinks gives node i one Link per worker address and returns
// its --kv-dial value.
func (c *Cluster) addWorkerLinks(i int, addrs []workerAddr) (string, error) {
	var dial []string
	for _, a := range addrs {
		name := fmt.Sprintf("%s->w%d/%s", NodeID(i), a.worker, a.kind)
		if a.rank != 0 {
			name += fmt.Sprintf("/r%d", a.rank)
		}
		l, err := faultproxy.NewLink(name, i, -1, a.kind, a.addr)
		if err != nil {
			return "", err
		}
		c.workerLinks[i] = append(c.workerLinks[i], l)
		dial = append(dial, a.addr+"="+l.Addr())
	}
	return strings.Join(dial, ","), nil
}

// registerSim registers kvsim's workers through the leader and waits
// until every live node listens to every worker rank.
func (c *Cluster) registerSim(ctx context.Context) error {
	leader, err := c.WaitLeader(ctx, nil)
	if err != nil {
		return err
	}
	for _, reg := range c.simRegs {
		reg.TotalKVBlocks = api.Ptr(uint64(SimTotalKVBlocks))
		if _, err := c.nodes[leader].cl.UpsertWorker(ctx, reg); err != nil {
			return fmt.Errorf("register kvsim worker %d: %w", *reg.WorkerID, err)
		}
	}
	return c.waitWorkersFollowed(ctx)
}

// waitWorkersFollowed waits until every live node's listeners for
// kvsim's workers are all active.
func (c *Cluster) waitWorkersFollowed(ctx context.Context) error {
	return poll.Until(ctx, pollEvery, "every node follows every kvsim worker", func(ctx context.Context) error {
		if err := c.sim.ExitedOnItsOwn(); err != nil {
			return poll.Fatal(fmt.Errorf("kvsim exited: %v (see %s)", err, c.sim.LogPath))
		}
		for _, i := range c.Live() {
			ws, err := c.nodes[i].cl.Workers(ctx, client.WorkersOptions{ModelName: c.cfg.Model})
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

// WorkerLinks are node i's links to kvsim's workers.
func (c *Cluster) WorkerLinks(i int) []*Link { return c.workerLinks[i] }

// CutWorkers blackholes node i's links to every worker (cut is true) or
// lets them pass again. While cut, node i misses every KV event; when
// they pass, its listeners reconnect and must replay what they missed.
func (c *Cluster) CutWorkers(i int, cut bool) {
	for _, l := range c.workerLinks[i] {
		f := l.Fault()
		f.Blackhole = cut
		l.SetFault(f)
	}
}

// allWorkerLinks are every node's links to the workers.
func (c *Cluster) allWorkerLinks() []*Link {
	var out []*Link
	for i := range c.nodes {
		out = append(out, c.workerLinks[i]...)
	}
	return out
}

// Sim is the client of kvsim's control API (nil when no kvsim runs):
// prompts, resets and engine restarts of its workers.
func (c *Cluster) Sim() *kvsim.ControlClient { return c.simCtl }

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
	ws, err := c.nodes[i].cl.Workers(ctx, client.WorkersOptions{ModelName: c.cfg.Model})
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
