package proccluster

import (
	"slices"
	"time"

	"github.com/kvselect/kvselect/internal/faultproxy"
)

// Links are the links from node from to node to: raft, http, sync (none
// without Config.Links).
func (c *Cluster) Links(from, to int) []*faultproxy.Link { return c.links[[2]int{from, to}] }

// AllLinks are every inter-node link.
func (c *Cluster) AllLinks() []*faultproxy.Link {
	var out []*faultproxy.Link
	for i := range c.nodes {
		for j := range c.nodes {
			out = append(out, c.Links(i, j)...)
		}
	}
	return out
}

// WorkerLinks are node i's links to the workers.
func (c *Cluster) WorkerLinks(i int) []*faultproxy.Link { return c.workerLinks[i] }

// AllWorkerLinks are every node's links to the workers.
func (c *Cluster) AllWorkerLinks() []*faultproxy.Link {
	var out []*faultproxy.Link
	for i := range c.nodes {
		out = append(out, c.workerLinks[i]...)
	}
	return out
}

// change changes the fault of every link of ls.
func change(ls []*faultproxy.Link, edit func(*faultproxy.Fault)) {
	for _, l := range ls {
		f := l.Fault()
		edit(&f)
		l.SetFault(f)
	}
}

// Partition cuts the cluster into groups: a link passes (other faults
// kept) when some group holds both its ends and is blackholed otherwise.
// Groups may overlap: {0,1},{1,2} lets 1 bridge 0 and 2, which cannot
// reach each other. A node in no group is isolated.
func (c *Cluster) Partition(groups ...[]int) {
	together := func(i, j int) bool {
		for _, g := range groups {
			if slices.Contains(g, i) && slices.Contains(g, j) {
				return true
			}
		}
		return false
	}
	for i := range c.nodes {
		for j := range c.nodes {
			if i != j {
				cut := !together(i, j)
				change(c.Links(i, j), func(f *faultproxy.Fault) { f.Blackhole = cut })
			}
		}
	}
}

// Isolate cuts node i off from every other node, both ways.
func (c *Cluster) Isolate(i int) {
	var rest []int
	for j := range c.nodes {
		if j != i {
			rest = append(rest, j)
		}
	}
	c.Partition([]int{i}, rest)
}

// OneWay blackholes every link from → to and leaves to → from alone. A
// link carries both directions of the connections from dials, so from's
// requests to to and their answers are lost while to's own connections
// to from still work.
func (c *Cluster) OneWay(from, to int) {
	change(c.Links(from, to), func(f *faultproxy.Fault) { f.Blackhole = true })
}

// SetLatency delays every chunk on every inter-node link by d plus up to
// jitter.
func (c *Cluster) SetLatency(d, jitter time.Duration) {
	change(c.AllLinks(), func(f *faultproxy.Fault) { f.Delay, f.Jitter = d, jitter })
}

// SetFlaky makes every inter-node link cut a connection with probability
// p at accept and at each chunk.
func (c *Cluster) SetFlaky(p float64) {
	change(c.AllLinks(), func(f *faultproxy.Fault) { f.DropProb = p })
}

// CutWorkers blackholes node i's links to every worker (cut is true) or
// lets them pass again.
func (c *Cluster) CutWorkers(i int, cut bool) {
	change(c.workerLinks[i], func(f *faultproxy.Fault) { f.Blackhole = cut })
}

// HealAll makes every link pass, the worker links too.
func (c *Cluster) HealAll() {
	for _, l := range append(c.AllLinks(), c.AllWorkerLinks()...) {
		l.Pass()
	}
}
