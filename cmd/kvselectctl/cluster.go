package main

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/kvselect/kvselect/api"
	"github.com/kvselect/kvselect/client"
)

func clusterCmd(e *env) *cobra.Command {
	return group("cluster", "the cluster's leader and members; change membership",
		clusterStatusCmd(e), clusterJoinCmd(e), clusterRemoveCmd(e), clusterStepDownCmd(e))
}

func clusterStatusCmd(e *env) *cobra.Command {
	return leaf("status", "this node's view of the leader and the members (GET /cluster/status)", 0, 0,
		func(*cobra.Command, []string) error {
			return show(e, func(ctx context.Context, c *client.Client) (*api.ClusterStatus, error) { return c.ClusterStatus(ctx) },
				func(p *printer, st *api.ClusterStatus, _ *client.ResponseInfo) error { return printStatus(p, st) })
		})
}

func clusterJoinCmd(e *env) *cobra.Command {
	return leaf("join <id> <raft_addr> [<http_addr>]", "add a voter (POST /cluster/join)", 2, 3,
		func(_ *cobra.Command, pos []string) error {
			req := api.JoinRequest{ID: pos[0], RaftAddr: pos[1]}
			if len(pos) == 3 {
				req.HTTPAddr = pos[2]
			}
			return clusterWrite(e, func(ctx context.Context, c *client.Client) (*api.ClusterStatus, error) { return c.Join(ctx, req) },
				fmt.Sprintf("%s joined at %s", pos[0], pos[1]))
		})
}

func clusterRemoveCmd(e *env) *cobra.Command {
	return leaf("remove <id>", "remove a member (POST /cluster/remove)", 1, 1,
		func(_ *cobra.Command, pos []string) error {
			return clusterWrite(e, func(ctx context.Context, c *client.Client) (*api.ClusterStatus, error) { return c.Remove(ctx, pos[0]) },
				pos[0]+" removed")
		})
}

// clusterWrite makes a membership change on the leader and prints what
// happened, then the cluster as the answering node sees it.
func clusterWrite(e *env, write func(ctx context.Context, c *client.Client) (*api.ClusterStatus, error), done string) error {
	return show(e, write, func(p *printer, st *api.ClusterStatus, info *client.ResponseInfo) error {
		p.linef("%s", done)
		p.applied(&client.ResponseInfo{ServedBy: info.ServedBy, NotApplied: info.NotApplied, Node: info.Node}, 0)
		p.linef("")
		return printStatus(p, st)
	})
}

// printStatus prints a summary line of the node, then one row per member.
func printStatus(p *printer, st *api.ClusterStatus) error {
	p.linef("node %s  state %s  term %d  leader %s  commit/applied %d/%d%s",
		st.NodeID, st.State, st.Term, leaderName(st.Leader), st.CommitIndex, st.AppliedIndex, lastContact(st))
	rows := make([][]string, 0, len(st.Members))
	for _, m := range st.Members {
		mark := ""
		if m.ID == st.Leader.ID {
			mark = "*"
		}
		rows = append(rows, []string{m.ID, orDash(m.RaftAddr), orDash(m.HTTPAddr), m.Suffrage, yesNo(m.Reachable), mark})
	}
	return p.table([]string{"ID", "RAFT", "HTTP", "SUFFRAGE", "REACHABLE", "LEADER"}, rows)
}

// leaderName is "n1 (host:port)", "n1" without an HTTP address, "-"
// without a leader.
func leaderName(l api.LeaderRef) string {
	name := orDash(l.ID)
	if l.HTTPAddr != "" {
		name += " (" + l.HTTPAddr + ")"
	}
	return name
}

// lastContact describes a follower's last contact with the leader.
func lastContact(st *api.ClusterStatus) string {
	switch {
	case st.State == api.StateLeader:
		return ""
	case st.LastContactMs < 0:
		return "  last contact never"
	default:
		return fmt.Sprintf("  last contact %dms ago", st.LastContactMs)
	}
}
