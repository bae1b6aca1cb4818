package jepsen

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"github.com/kvselect/kvselect/api"
	"github.com/kvselect/kvselect/internal/poll"
)

// memberRemoveRejoin is a membership change (SPEC §3.5, README "How a
// cluster behaves"): Inject removes a random follower through
// POST /cluster/remove, sent to a random other node (a follower forwards
// it), and checks that the answer no longer lists it, that the removed
// process stops on its own with exit status 0 (a removed kvselect exits)
// and that the other two keep a leader and list two members. Heal starts
// it again on its data dir and adds it back through POST /cluster/join,
// again through a random other node; the node promotes itself to voter
// once it holds the configuration that lists it, and Heal waits for
// three voters and a healthy cluster. The removed node is down (its
// selections fail) from the inject to the heal.
//
// Run does one such change in every scenario, after the nemesis's
// cycles and with the workload still running (a membership change in the
// workload, SPEC §13); as a nemesis it repeats in cycles.
type memberRemoveRejoin struct {
	mu      sync.Mutex
	victim  int
	member  api.Member // the victim as the members listed it
	changes int        // heals that brought the victim back as a voter
}

// Changes is how many times a removed follower came back as a voter.
func (n *memberRemoveRejoin) Changes() int {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.changes
}

func (*memberRemoveRejoin) Name() string { return "member-remove-rejoin" }

// memberChangeBound bounds each step of a membership change: the
// removal's commit, the removed node's exit, the join, the promotion.
const memberChangeBound = 30 * time.Second

func (n *memberRemoveRejoin) Inject(ctx context.Context, c *Cluster) error {
	leader, err := c.WaitLeader(ctx, nil)
	if err != nil {
		return err
	}
	fs := others(c, leader)
	victim := fs[rand.N(len(fs))]
	st, err := c.Status(ctx, leader)
	if err != nil {
		return err
	}
	i := slices.IndexFunc(st.Members, func(m api.Member) bool { return m.ID == NodeID(victim) })
	if i < 0 {
		return fmt.Errorf("leader %s does not list %s", NodeID(leader), NodeID(victim))
	}
	n.mu.Lock()
	n.victim, n.member = victim, st.Members[i]
	n.mu.Unlock()
	at := c.Now()
	detail := "remove " + NodeID(victim)
	err = n.remove(ctx, c, victim)
	if err == nil {
		err = n.awaitExit(ctx, c, victim)
	}
	if err != nil {
		detail += "; " + err.Error()
	}
	c.RecordEventAt(at, n.Name(), PhaseInject, detail, victim)
	return err
}

// remove asks a random other node to remove victim until one answers
// with a configuration that does not list it.
func (n *memberRemoveRejoin) remove(ctx context.Context, c *Cluster, victim int) error {
	wctx, cancel := context.WithTimeout(ctx, memberChangeBound)
	defer cancel()
	return poll.Until(wctx, pollEvery, "a node removes "+NodeID(victim), func(ctx context.Context) error {
		rest := others(c, victim)
		via := rest[rand.N(len(rest))]
		rctx, cancel := context.WithTimeout(ctx, 2*OpTimeout)
		st, err := c.Node(via).Client.Remove(rctx, NodeID(victim))
		cancel()
		if err != nil {
			return fmt.Errorf("remove through %s: %w", NodeID(via), err)
		}
		if slices.ContainsFunc(st.Members, func(m api.Member) bool { return m.ID == NodeID(victim) }) {
			return poll.Fatal(fmt.Errorf("remove through %s answered members %+v, still listing %s", NodeID(via), st.Members, NodeID(victim)))
		}
		return nil
	})
}

// awaitExit waits until the removed node's process has exited on its own
// with status 0 and the others agree on a leader and two members.
func (n *memberRemoveRejoin) awaitExit(ctx context.Context, c *Cluster, victim int) error {
	wctx, cancel := context.WithTimeout(ctx, memberChangeBound)
	defer cancel()
	err := poll.Until(wctx, pollEvery, NodeID(victim)+" stops after its removal", func(context.Context) error {
		if c.Running(victim) {
			return fmt.Errorf("%s still runs", NodeID(victim))
		}
		return nil
	})
	if err != nil {
		return err
	}
	if exit := c.Node(victim).Proc.ExitErr(); exit != nil {
		return fmt.Errorf("%s exited with %v after its removal, want status 0 (see %s)", NodeID(victim), exit, c.LogPath(victim))
	}
	rest := others(c, victim)
	return poll.Until(wctx, pollEvery, "the others list two members", func(ctx context.Context) error {
		li, err := c.LeaderAmong(ctx, rest)
		if err != nil {
			return err
		}
		st, err := c.Status(ctx, li)
		if err != nil {
			return err
		}
		if len(st.Members) != len(rest) {
			return fmt.Errorf("leader %s lists %d members", NodeID(li), len(st.Members))
		}
		return nil
	})
}

func (n *memberRemoveRejoin) Heal(ctx context.Context, c *Cluster) error {
	n.mu.Lock()
	victim, member := n.victim, n.member
	n.mu.Unlock()
	detail := "start " + NodeID(victim) + " again and join it"
	err := n.rejoin(ctx, c, victim, member)
	if err == nil {
		err = c.Recover(ctx)
	}
	if err != nil {
		detail += "; not healthy: " + err.Error()
	} else {
		n.mu.Lock()
		n.changes++
		n.mu.Unlock()
	}
	c.RecordEvent(n.Name(), PhaseHeal, detail)
	return err
}

// rejoin starts victim on its data dir, asks a random other node to add
// it back until one acknowledges, and waits until it is a voter.
func (n *memberRemoveRejoin) rejoin(ctx context.Context, c *Cluster, victim int, member api.Member) error {
	if c.Running(victim) {
		return fmt.Errorf("%s still runs: it was never removed", NodeID(victim))
	}
	if err := c.Node(victim).Proc.Start(); err != nil {
		return err
	}
	wctx, cancel := context.WithTimeout(ctx, memberChangeBound)
	defer cancel()
	req := api.JoinRequest{ID: member.ID, RaftAddr: member.RaftAddr, HTTPAddr: member.HTTPAddr}
	err := poll.Until(wctx, pollEvery, "a node adds "+NodeID(victim)+" back", func(ctx context.Context) error {
		if err := c.Node(victim).Proc.ExitedOnItsOwn(); err != nil {
			return poll.Fatal(fmt.Errorf("%s exited: %v (see %s)", NodeID(victim), err, c.LogPath(victim)))
		}
		rest := others(c, victim)
		via := rest[rand.N(len(rest))]
		jctx, cancel := context.WithTimeout(ctx, 2*OpTimeout)
		_, err := c.Node(via).Client.Join(jctx, req)
		cancel()
		if err != nil {
			return fmt.Errorf("join through %s: %w", NodeID(via), err)
		}
		return nil
	})
	if err != nil {
		return err
	}
	return poll.Until(wctx, pollEvery, NodeID(victim)+" is a voter again", func(ctx context.Context) error {
		li, err := c.LeaderAmong(ctx, c.Live())
		if err != nil {
			return err
		}
		st, err := c.Status(ctx, li)
		if err != nil {
			return err
		}
		voters := 0
		for _, m := range st.Members {
			if m.Suffrage == api.SuffrageVoter {
				voters++
			}
		}
		if voters != c.Size() {
			return fmt.Errorf("leader %s lists members %+v", NodeID(li), st.Members)
		}
		return nil
	})
}
