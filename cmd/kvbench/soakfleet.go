package main

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/kvselect/kvselect/api"
	"github.com/kvselect/kvselect/client"
	"github.com/kvselect/kvselect/internal/childproc"
	"github.com/kvselect/kvselect/internal/poll"
	"github.com/kvselect/kvselect/kvsim"
	"github.com/kvselect/kvselect/server/proccluster"
)

// pollEvery is how often the soak asks whether what it waits for holds.
const pollEvery = 50 * time.Millisecond

// The soak's model, block size and worker layout.
const (
	soakModel     = "soak"
	soakBlockSize = 16
	// churnWorkerID is the kvsim id of the worker the soak registers,
	// patches, removes and re-adds itself; the catalog ids it uses start
	// here and grow (every id at or above it is that worker).
	churnWorkerID = 1000
)

// soakNode is one kvselect process and a client whose home is that node.
type soakNode struct {
	id   string
	url  string
	proc *childproc.Proc
	cl   *client.Client
}

// soakSim is one kvsim process: a few workers with the same dp size.
type soakSim struct {
	name     string
	proc     *childproc.Proc
	ctl      *kvsim.ControlClient
	firstID  uint64
	workers  int
	dp       int
	register bool        // kvsim registers its workers itself (--register)
	up       atomic.Bool // the process runs and its workers are registered
}

// owns reports whether kvselect worker id is served by this process, and
// under which kvsim id.
func (s *soakSim) owns(id uint64) (uint64, bool) {
	if !s.register {
		return churnWorkerID, id >= churnWorkerID
	}
	return id, id >= s.firstID && id < s.firstID+uint64(s.workers)
}

// fleet is the soak's processes: three kvselect nodes forming a cluster
// with replica sync, kvsim processes that register their own workers
// (restarted during the run), and one kvsim worker the soak churns through
// the catalog.
type fleet struct {
	dir   string
	pc    *proccluster.Cluster // the nodes' processes
	nodes []*soakNode
	sims  []*soakSim // registered by kvsim, restartable
	churn *soakSim   // registered by the soak under rotating ids
	hc    *http.Client
	logf  func(format string, args ...any)
}

// startFleet starts the nodes, waits for the cluster and the replica-sync
// mesh, then starts the kvsim processes and waits until every node follows
// every worker rank. On error the processes it started keep running; the
// caller stops them with stopAll.
func startFleet(ctx context.Context, binDir string, cacheBlocks int, f *fleet) error {
	dir, err := os.MkdirTemp("", "kvselect-soak-")
	if err != nil {
		return err
	}
	f.dir = dir
	f.hc = &http.Client{Timeout: 10 * time.Second}
	layout := []struct {
		name     string
		firstID  uint64
		workers  int
		dp       int
		register bool
	}{
		{name: "kvsim-a", firstID: 1, workers: 2, dp: 1, register: true},
		{name: "kvsim-b", firstID: 3, workers: 2, dp: 2, register: true},
		{name: "kvsim-c", firstID: 5, workers: 1, dp: 4, register: true},
		{name: "kvsim-churn", firstID: churnWorkerID, workers: 1, dp: 2},
	}
	const n = 3
	sctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	f.pc, err = proccluster.StartHealthy(sctx, proccluster.Config{Bin: filepath.Join(binDir, "kvselect"), Dir: dir, Nodes: n, Tag: "soak",
		Options: func(_ int, o *proccluster.NodeOptions) { o.LogLevel = "warn" }})
	if err != nil {
		return err
	}
	for _, pn := range f.pc.Nodes() {
		// The load's clients follow the leader and retry, unlike the
		// harness's pinned ones.
		node := &soakNode{id: pn.ID, url: pn.URL, proc: pn.Proc}
		if node.cl, err = client.New(client.Config{Addrs: []string{node.url}}); err != nil {
			return err
		}
		f.nodes = append(f.nodes, node)
	}
	if err := f.waitMesh(ctx); err != nil {
		return err
	}
	ports, lns, err := childproc.ReservePorts(len(layout))
	childproc.CloseAll(lns)
	if err != nil {
		return err
	}
	f.logf("cluster of %d nodes up, replica sync meshed (logs and data in %s)", n, dir)

	for i, l := range layout {
		s := &soakSim{name: l.name, firstID: l.firstID, workers: l.workers, dp: l.dp, register: l.register}
		args := []string{"--workers", strconv.Itoa(s.workers), "--first-worker-id", strconv.FormatUint(s.firstID, 10),
			"--dp-size", strconv.Itoa(s.dp), "--block-size", strconv.Itoa(soakBlockSize),
			"--cache-blocks", strconv.Itoa(cacheBlocks), "--model", soakModel, "--log-level", "warn"}
		if s.register {
			// Each fleet registers through another node: two of them
			// are followers, which forward the writes to the leader.
			args = append(args, "--register", f.nodes[i%n].url)
		}
		sim := proccluster.NewSim(proccluster.SimConfig{Bin: filepath.Join(binDir, "kvsim"), Name: s.name, Dir: dir, Tag: "soak",
			Control: fmt.Sprintf("127.0.0.1:%d", ports[i]), Args: args, HTTPClient: f.hc})
		s.proc, s.ctl = sim.Proc, sim.Control
		if s.register {
			f.sims = append(f.sims, s)
		} else {
			f.churn = s
		}
	}
	for _, s := range append(f.sims, f.churn) {
		if err := s.proc.Start(); err != nil {
			return err
		}
	}
	for _, s := range f.sims {
		if err := f.waitFollowed(ctx, s, 0); err != nil {
			return err
		}
		s.up.Store(true)
	}
	return nil
}

// waitMesh waits until every node follows the two other nodes' replica
// sync (the harness has waited for the cluster itself).
func (f *fleet) waitMesh(ctx context.Context) error {
	return poll.Within(ctx, 60*time.Second, pollEvery, "replica sync meshes", func(ctx context.Context) error {
		if err := f.pc.Exited(); err != nil {
			return poll.Fatal(err)
		}
		for _, node := range f.nodes {
			rs, err := node.cl.ReplicaSyncStatus(ctx)
			if err != nil {
				return err
			}
			active := 0
			for _, p := range rs.Peers {
				if p.State == "active" {
					active++
				}
			}
			if active != len(f.nodes)-1 {
				return fmt.Errorf("%s follows %d peers actively", node.id, active)
			}
		}
		return nil
	})
}

// waitFollowed waits until every node has an active listener on every
// rank of s's workers at the endpoints s now publishes on. For the churn
// fleet, id is the catalog id its worker is registered under.
func (f *fleet) waitFollowed(ctx context.Context, s *soakSim, id uint64) error {
	return poll.Within(ctx, 60*time.Second, pollEvery, "every node follows "+s.name, func(ctx context.Context) error {
		if _, ok := s.proc.Running(); !ok {
			return fmt.Errorf("%s exited: %v (see %s)", s.name, s.proc.ExitErr(), s.proc.LogPath)
		}
		regs, err := s.ctl.Workers(ctx)
		if err != nil {
			return err
		}
		for _, node := range f.nodes {
			ws, err := node.cl.Workers(ctx, client.WorkersOptions{ModelName: soakModel})
			if err != nil {
				return err
			}
			byID := map[uint64]api.Worker{}
			for _, w := range ws {
				byID[w.WorkerID] = w
			}
			for _, reg := range regs {
				wid := *reg.WorkerID
				if !s.register {
					wid = id
				}
				w, ok := byID[wid]
				if !ok {
					return fmt.Errorf("%s does not have worker %d", node.id, wid)
				}
				for rank, ep := range *reg.KVEventsEndpoints {
					l, ok := w.Listeners[rank]
					if !ok || l.State != "active" || l.Endpoint != ep {
						return fmt.Errorf("%s: worker %d rank %d listener %+v, want active on %s", node.id, wid, rank, l, ep)
					}
				}
			}
		}
		return nil
	})
}

// simFor returns the kvsim process serving kvselect worker id and the id
// it knows the worker by.
func (f *fleet) simFor(id uint64) (*soakSim, uint64, bool) {
	for _, s := range append(f.sims[:len(f.sims):len(f.sims)], f.churn) {
		if kid, ok := s.owns(id); ok {
			return s, kid, true
		}
	}
	return nil, 0, false
}

// restartSim kills a kvsim process (SIGKILL: an engine crash) and starts
// it again. It binds new ports, so it registers new endpoints and every
// node's listeners for its ranks restart from sequence 0. It returns once
// every node follows the new endpoints.
func (f *fleet) restartSim(ctx context.Context, s *soakSim) error {
	s.up.Store(false)
	s.proc.Stop(syscall.SIGKILL, 0)
	if err := s.proc.Start(); err != nil {
		return err
	}
	if err := f.waitFollowed(ctx, s, 0); err != nil {
		return err
	}
	s.up.Store(true)
	return nil
}

// stopAll stops the kvsim processes, then the nodes (SIGTERM, SIGKILL
// after a few seconds), and waits until every one is reaped.
func (f *fleet) stopAll() {
	var wg sync.WaitGroup
	for _, s := range append(f.sims[:len(f.sims):len(f.sims)], f.churn) {
		if s != nil && s.proc != nil {
			wg.Go(func() { s.proc.Stop(syscall.SIGTERM, 5*time.Second) })
		}
	}
	wg.Wait()
	if f.pc != nil {
		f.pc.Close()
	}
}
