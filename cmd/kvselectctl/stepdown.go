package main

import (
	"cmp"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/kvselect/kvselect/api"
	"github.com/kvselect/kvselect/client"
	"github.com/kvselect/kvselect/internal/backoff"
	"github.com/kvselect/kvselect/internal/poll"
)

// Pacing of the status polls after a step-down.
const (
	firstStatusPoll = 50 * time.Millisecond
	maxStatusPoll   = 500 * time.Millisecond
)

func clusterStepDownCmd(e *env) *cobra.Command {
	cmd := leaf("stepdown", "hand leadership to another voter and wait for the new leader (POST /cluster/stepdown)", 0, 0,
		func(*cobra.Command, []string) error { return stepDown(e) })
	cmd.Long = `Hand leadership to another voter (POST /cluster/stepdown), then ask the node
for its status until it names the new leader, within --timeout. Prints
the leader before and after, then the cluster as that node sees it; with
--json, that node's /cluster/status. No new leader within --timeout is an
error (exit 1). A step-down is never sent twice: a second one would move
leadership again.`
	return cmd
}

// stepDown asks the leader to hand over, waits until a node names another
// leader, and prints both.
func stepDown(e *env) error {
	c, err := e.client()
	if err != nil {
		return err
	}
	var info client.ResponseInfo
	st, err := c.StepDown(client.WithResponseInfo(e.ctx, &info))
	e.leaderWait.stop() // the wait that follows has its own line
	if client.CodeOf(err) == api.CodeUnknownOutcome {
		return &hinted{err, "the step-down may or may not have happened; 'kvselectctl cluster status' shows who leads now " +
			"(running the step-down again could move leadership twice)"}
	}
	if err != nil {
		return err
	}
	before := previousLeader(st, &info)
	after, body, err := awaitNewLeader(e, c, before, st, info.Body)
	if err != nil {
		return err
	}
	p := e.out()
	if p.json {
		return p.indented(body)
	}
	p.linef("leader before: %s", before)
	p.linef("leader after:  %s", leaderName(after.Leader))
	p.linef("")
	return printStatus(p, after)
}

// previousLeader is the node that answered a step-down: the leader that
// stepped down (a follower that forwards it returns the leader's answer).
func previousLeader(st *api.ClusterStatus, info *client.ResponseInfo) string {
	return cmp.Or(info.ServedBy, st.NodeID)
}

// awaitNewLeader polls the home node's status until it names a leader
// other than old, for up to --timeout, and returns that status and its
// body. st and body are the step-down's answer, which may name it already.
func awaitNewLeader(e *env, c *client.Client, old string, st *api.ClusterStatus, body []byte) (*api.ClusterStatus, []byte, error) {
	start := time.Now()
	deadline, ok := e.ctx.Deadline() // --timeout: the step-down's own request counts
	if !ok {
		deadline = start.Add(e.g.timeout)
	}
	pause := backoff.New(firstStatusPoll, maxStatusPoll)
	waiting := newProgress(e.stderr, "waiting for the new leader")
	var lastErr error
	for st.Leader.ID == "" || st.Leader.ID == old {
		wait, _, _ := pause.Next()
		if time.Now().Add(wait).After(deadline) {
			return nil, nil, noNewLeader(old, st, lastErr, e.g.timeout)
		}
		if err := poll.Sleep(e.ctx, wait); err != nil {
			return nil, nil, err
		}
		var info client.ResponseInfo
		next, err := c.ClusterStatus(client.WithResponseInfo(e.ctx, &info))
		if err != nil {
			lastErr = err
		} else {
			st, body, lastErr = next, info.Body, nil
		}
		waiting.tick(time.Since(start), "")
	}
	return st, body, nil
}

// noNewLeader says what the cluster looked like when the wait ended.
func noNewLeader(old string, st *api.ClusterStatus, lastErr error, waited time.Duration) error {
	var now string
	switch {
	case st.Leader.ID == old:
		now = fmt.Sprintf("%s says %s leads again (term %d)", st.NodeID, old, st.Term)
	default:
		now = fmt.Sprintf("%s knows no leader yet (state %s, term %d)", st.NodeID, st.State, st.Term)
	}
	if lastErr != nil {
		now += fmt.Sprintf("; the last status request failed: %v", lastErr)
	}
	return fmt.Errorf("%s stepped down, but no new leader within %v: %s; 'kvselectctl cluster status' shows the cluster", old, waited, now)
}
