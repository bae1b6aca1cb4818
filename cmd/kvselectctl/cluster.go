package main

import (
	"context"
	"fmt"

	"github.com/kvselect/kvselect/api"
	"github.com/kvselect/kvselect/client"
)

func clusterStatusCmd(e *env, args []string) error {
	if _, err := e.parse(e.flags(), args, 0, 0); err != nil {
		return err
	}
	return show(e, func(ctx context.Context, c *client.Client) (*api.ClusterStatus, error) { return c.ClusterStatus(ctx) },
		func(p *printer, st *api.ClusterStatus, _ *client.ResponseInfo) error { return printStatus(p, st) })
}

func clusterJoinCmd(e *env, args []string) error {
	pos, err := e.parse(e.flags(), args, 2, 3)
	if err != nil {
		return err
	}
	req := api.JoinRequest{ID: pos[0], RaftAddr: pos[1]}
	if len(pos) == 3 {
		req.HTTPAddr = pos[2]
	}
	return clusterWrite(e, func(ctx context.Context, c *client.Client) (*api.ClusterStatus, error) { return c.Join(ctx, req) },
		func(*api.ClusterStatus) string { return fmt.Sprintf("%s joined at %s", pos[0], pos[1]) })
}

func clusterRemoveCmd(e *env, args []string) error {
	pos, err := e.parse(e.flags(), args, 1, 1)
	if err != nil {
		return err
	}
	return clusterWrite(e, func(ctx context.Context, c *client.Client) (*api.ClusterStatus, error) { return c.Remove(ctx, pos[0]) },
		func(*api.ClusterStatus) string { return pos[0] + " removed" })
}

func clusterStepDownCmd(e *env, args []string) error {
	if _, err := e.parse(e.flags(), args, 0, 0); err != nil {
		return err
	}
	return clusterWrite(e, func(ctx context.Context, c *client.Client) (*api.ClusterStatus, error) { return c.StepDown(ctx) },
		func(st *api.ClusterStatus) string {
			if st.Leader.ID == "" || st.Leader.ID == st.NodeID {
				return st.NodeID + " stepped down; a new leader is being elected"
			}
			return fmt.Sprintf("%s stepped down; leader is now %s", st.NodeID, st.Leader.ID)
		})
}

// clusterWrite makes a membership change on the leader and prints what
// happened, then the cluster as the answering node sees it.
func clusterWrite(e *env, write func(ctx context.Context, c *client.Client) (*api.ClusterStatus, error),
	done func(*api.ClusterStatus) string) error {
	return show(e, write, func(p *printer, st *api.ClusterStatus, info *client.ResponseInfo) error {
		p.linef("%s", done(st))
		p.applied(&client.ResponseInfo{ServedBy: info.ServedBy, NotApplied: info.NotApplied, Node: info.Node}, 0)
		p.linef("")
		return printStatus(p, st)
	})
}

// printStatus prints a summary line of the node, then one row per member.
func printStatus(p *printer, st *api.ClusterStatus) error {
	leader := orDash(st.Leader.ID)
	if st.Leader.HTTPAddr != "" {
		leader += " (" + st.Leader.HTTPAddr + ")"
	}
	p.linef("node %s  state %s  term %d  leader %s  commit/applied %d/%d%s",
		st.NodeID, st.State, st.Term, leader, st.CommitIndex, st.AppliedIndex, lastContact(st))
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
