package main

import (
	"encoding/json"
	"fmt"
	"net/http"
)

// clusterStatus is GET /cluster/status, and the answer to every cluster
// write.
type clusterStatus struct {
	NodeID string `json:"node_id"`
	State  string `json:"state"`
	Term   uint64 `json:"term"`
	Leader struct {
		ID       string `json:"id"`
		HTTPAddr string `json:"http_addr"`
	} `json:"leader"`
	CommitIndex   uint64   `json:"commit_index"`
	AppliedIndex  uint64   `json:"applied_index"`
	LastContactMs int64    `json:"last_contact_ms"`
	Members       []member `json:"members"`
}

type member struct {
	ID        string `json:"id"`
	RaftAddr  string `json:"raft_addr"`
	HTTPAddr  string `json:"http_addr"`
	Suffrage  string `json:"suffrage"`
	Reachable bool   `json:"reachable"`
}

func clusterStatusCmd(e *env, args []string) error {
	if _, err := e.parse(e.flags(), args, 0, 0); err != nil {
		return err
	}
	c, err := e.client()
	if err != nil {
		return err
	}
	resp, err := c.read(e.ctx, request{method: http.MethodGet, path: "/cluster/status"})
	if err != nil {
		return err
	}
	return show(e.out(), resp, printStatus)
}

func clusterJoinCmd(e *env, args []string) error {
	pos, err := e.parse(e.flags(), args, 2, 3)
	if err != nil {
		return err
	}
	body := map[string]string{"id": pos[0], "raft_addr": pos[1]}
	if len(pos) == 3 {
		body["http_addr"] = pos[2]
	}
	return clusterWrite(e, "/cluster/join", body, func(clusterStatus) string {
		return fmt.Sprintf("%s joined at %s", pos[0], pos[1])
	})
}

func clusterRemoveCmd(e *env, args []string) error {
	pos, err := e.parse(e.flags(), args, 1, 1)
	if err != nil {
		return err
	}
	return clusterWrite(e, "/cluster/remove", map[string]string{"id": pos[0]}, func(clusterStatus) string {
		return pos[0] + " removed"
	})
}

func clusterStepDownCmd(e *env, args []string) error {
	if _, err := e.parse(e.flags(), args, 0, 0); err != nil {
		return err
	}
	return clusterWrite(e, "/cluster/stepdown", nil, func(st clusterStatus) string {
		if st.Leader.ID == "" || st.Leader.ID == st.NodeID {
			return st.NodeID + " stepped down; a new leader is being elected"
		}
		return fmt.Sprintf("%s stepped down; leader is now %s", st.NodeID, st.Leader.ID)
	})
}

// clusterWrite posts a membership change to the leader and prints what
// happened, then the cluster as the answering node sees it.
func clusterWrite(e *env, path string, body map[string]string, done func(clusterStatus) string) error {
	c, err := e.client()
	if err != nil {
		return err
	}
	req := request{method: http.MethodPost, path: path}
	if body != nil {
		if req.body, err = json.Marshal(body); err != nil {
			return err
		}
	}
	resp, err := c.viaLeader(e.ctx, req, true)
	if err != nil {
		return err
	}
	return show(e.out(), resp, func(p *printer, st clusterStatus) error {
		p.linef("%s", done(st))
		p.applied(resp, 0)
		p.linef("")
		return printStatus(p, st)
	})
}

// printStatus prints a summary line of the node, then one row per member.
func printStatus(p *printer, st clusterStatus) error {
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
func lastContact(st clusterStatus) string {
	switch {
	case st.State == stateLeader:
		return ""
	case st.LastContactMs < 0:
		return "  last contact never"
	default:
		return fmt.Sprintf("  last contact %dms ago", st.LastContactMs)
	}
}
