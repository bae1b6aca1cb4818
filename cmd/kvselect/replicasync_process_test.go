package main

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kvselect/kvselect/api"
	"github.com/kvselect/kvselect/server/proccluster"
)

// Test_ReplicaSyncProcesses runs real kvselect processes started the way
// a user starts them by hand (README, Running a cluster), with no
// replica-sync flag, and checks SPEC §2's rule: a cluster shares load by
// default; a node alone runs without replica sync (Dynamo's peers [] and
// register_peer 409) until a node joins it; --replica-sync=false keeps
// it off.
func Test_ReplicaSyncProcesses(t *testing.T) {
	bin := buildKvselect(t)
	t.Run("three nodes share load by default", func(t *testing.T) {
		c := startProcCluster(t, bin, 3, "--log-level", "info")
		c.waitAgreement(30 * time.Second)
		for _, node := range c.nodes {
			c.waitLog(node, `msg="replica sync on"`, `why="--initial-cluster lists 3 members"`)
		}
		c.waitReplicaSyncMesh()
		mustRegister(t, c, 1)
		c.waitWorkerEverywhere(1)
		c.book(c.nodes[0], "r-n1")
		for _, other := range c.nodes[1:] {
			c.waitMirrored(other, "r-n1", c.nodes[0].id)
		}
	})
	t.Run("a lone node turns replica sync on when a node joins", func(t *testing.T) {
		c := startLoneProc(t, bin, "--log-level", "info")
		lone := c.nodes[0]
		c.waitAgreement(30 * time.Second)
		c.waitLog(lone, `msg="replica sync off"`, `why="alone in its Raft configuration`)
		c.checkReplicaSyncOff(lone)
		mustRegister(t, c, 1)
		c.book(lone, "r-alone") // booked while alone: the first live set carries it over

		c.addJoiner(lone, "--log-level", "info")
		c.waitAgreement(30 * time.Second)
		c.waitLog(lone, `msg="replica sync on"`, `why="the Raft configuration has 2 members"`)
		c.waitLog(c.nodes[1], `msg="replica sync on"`, `why="joining a cluster (--join)"`)
		c.waitReplicaSyncMesh()
		c.waitWorkerEverywhere(1)
		c.waitMirrored(c.nodes[1], "r-alone", lone.id)
		c.book(c.nodes[1], "r-joiner")
		c.waitMirrored(lone, "r-joiner", c.nodes[1].id)
	})
	t.Run("--replica-sync=false turns it off", func(t *testing.T) {
		c := startProcCluster(t, bin, 3, "--log-level", "info", "--replica-sync=false")
		c.waitAgreement(30 * time.Second)
		for _, node := range c.nodes {
			c.waitLog(node, `msg="replica sync off"`, `why="turned off (--replica-sync=false)"`)
			c.checkReplicaSyncOff(node)
		}
	})
}

// startLoneProc starts one node the way a first try does: its own id,
// ports and data dir, and no cluster flag at all.
func startLoneProc(t *testing.T, bin string, extra ...string) *procCluster {
	t.Helper()
	return startProcs(t, bin, 1, func(o *proccluster.NodeOptions) { o.InitialCluster = nil; o.Extra = extra })
}

// addJoiner starts node n<len+1>, which joins the cluster through via.
func (c *procCluster) addJoiner(via *procNode, extra ...string) *procNode {
	c.t.Helper()
	return c.startNew([]string{via.url("")}, extra...)
}

// startNew starts node n<len+1> on fresh loopback ports, joining through
// the members at join (none: it bootstraps a cluster of its own), with
// extra flags.
func (c *procCluster) startNew(join []string, extra ...string) *procNode {
	c.t.Helper()
	node, err := c.pc.AddNode(func(o *proccluster.NodeOptions) { o.Join, o.Extra = join, extra })
	if err != nil {
		c.t.Fatal(err)
	}
	pn := c.wrap(len(c.nodes), node)
	c.nodes = append(c.nodes, pn)
	return pn
}

// waitLog waits until one line of node's log holds every part of want.
func (c *procCluster) waitLog(node *procNode, want ...string) {
	c.t.Helper()
	c.eventually(fmt.Sprintf("%s logs %q", node.id, want), 30*time.Second, func() error {
		raw, err := os.ReadFile(node.logPath)
		if err != nil {
			return err
		}
		for line := range strings.Lines(string(raw)) {
			if !slices.ContainsFunc(want, func(w string) bool { return !strings.Contains(line, w) }) {
				return nil
			}
		}
		return fmt.Errorf("no such line yet")
	})
}

// checkReplicaSyncOff checks Dynamo's answers of a node without replica
// sync: peers [], register_peer 409, status disabled.
func (c *procCluster) checkReplicaSyncOff(node *procNode) {
	c.t.Helper()
	var peers []string
	if err := getJSON(node, api.PathReplicaSyncPeers, &peers); err != nil || peers == nil || len(peers) != 0 {
		c.t.Fatalf("GET /replica_sync/peers on %s = %#v, %v; want []", node.id, peers, err)
	}
	a, err := send(context.Background(), pollClient, http.MethodPost, node.url(api.PathReplicaSyncRegister), `{"endpoint": "tcp://127.0.0.1:1"}`)
	if err != nil || a.status != http.StatusConflict || a.code() != string(api.CodeConflict) {
		c.t.Fatalf("register_peer on %s: %v, %v; want 409 conflict", node.id, a, err)
	}
	var st api.ReplicaSyncStatus
	if err := getJSON(node, api.PathReplicaSyncStatus, &st); err != nil || st.Enabled {
		c.t.Fatalf("GET /replica_sync/status on %s = %+v, %v; want disabled", node.id, st, err)
	}
}

// waitReplicaSyncMesh waits until every node runs replica sync and
// follows every other node, as a cluster member, actively: the endpoints
// came from the catalog, not from a flag.
func (c *procCluster) waitReplicaSyncMesh() {
	c.t.Helper()
	c.eventually("every node follows every other node's replica sync", 30*time.Second, func() error {
		for _, node := range c.nodes {
			var st api.ReplicaSyncStatus
			if err := getJSON(node, api.PathReplicaSyncStatus, &st); err != nil {
				return err
			}
			if !st.Enabled {
				return fmt.Errorf("%s: replica sync off", node.id)
			}
			var following []string
			for _, p := range st.Peers {
				if p.State != "active" || !slices.Contains(p.Sources, api.PeerSourceMember) {
					return fmt.Errorf("%s: peer %+v", node.id, p)
				}
				following = append(following, p.NodeID)
			}
			for _, other := range c.nodes {
				if other != node && !slices.Contains(following, other.id) {
					return fmt.Errorf("%s follows %v, not %s", node.id, following, other.id)
				}
			}
		}
		return nil
	})
}

// waitWorkerEverywhere waits until every node's catalog has worker id, so
// that a mirrored booking of it has a rank to land on.
func (c *procCluster) waitWorkerEverywhere(id uint64) {
	c.t.Helper()
	c.eventually(fmt.Sprintf("every node knows worker %d", id), 30*time.Second, func() error {
		for _, node := range c.nodes {
			ids, err := localWorkerIDs(node)
			if err != nil {
				return err
			}
			if !slices.Contains(ids, id) {
				return fmt.Errorf("%s lists workers %v", node.id, ids)
			}
		}
		return nil
	})
}

// book books reservation id on worker 1 through node.
func (c *procCluster) book(node *procNode, id string) {
	c.t.Helper()
	body := fmt.Sprintf(`{"reservation_id": %q, "model_name": "m", "worker_id": 1, "sequence_hashes": [7, 8], "isl_tokens": 32}`, id)
	a, err := send(context.Background(), pollClient, http.MethodPost, node.url(api.PathReservations), body)
	if err != nil || a.status != http.StatusCreated {
		c.t.Fatalf("book %s on %s: %v, %v", id, node.id, a, err)
	}
}

// waitMirrored waits until node holds reservation id as a mirror of
// origin's booking, and counts it in its loads.
func (c *procCluster) waitMirrored(node *procNode, id, origin string) {
	c.t.Helper()
	c.eventually(fmt.Sprintf("%s mirrors %s's booking %s", node.id, origin, id), 30*time.Second, func() error {
		var r api.ReservationInfo
		if err := getJSON(node, api.PathReservations+"/"+id, &r); err != nil {
			return err
		}
		if r.Origin != api.OriginPeer || r.OriginNode != origin {
			return fmt.Errorf("%s holds %s as %s of %q", node.id, id, r.Origin, r.OriginNode)
		}
		var loads []api.PartitionLoads
		if err := getJSON(node, api.PathLoads, &loads); err != nil {
			return err
		}
		for _, pl := range loads {
			for _, l := range pl.Loads {
				if l.WorkerID == 1 && l.ActiveRequests > 0 {
					return nil
				}
			}
		}
		return fmt.Errorf("%s's loads do not count it: %+v", node.id, loads)
	})
}
