package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/kvselect/kvselect/internal/poll"
)

// Test_RemovedNodeExits runs three real kvselect processes, removes a
// follower through the leader, and proves that the removed process says
// why, stops on its own and exits with status 0, while the other two keep
// a leader and the member list without it.
func Test_RemovedNodeExits(t *testing.T) {
	c := startFastFailover(t, "info")
	leader := c.waitAgreement(30 * time.Second)
	var victim *procNode
	for _, node := range c.nodes {
		if node != leader {
			victim = node
			break
		}
	}

	victim.mayExit = true // from here on
	body := fmt.Sprintf(`{"id": %q}`, victim.id)
	c.eventually("the leader removes "+victim.id, 30*time.Second, func() error {
		a, err := send(context.Background(), pollClient, http.MethodPost, leader.url("/cluster/remove"), body)
		if err != nil {
			return err
		}
		if a.status != http.StatusOK {
			return fmt.Errorf("remove: %v", a)
		}
		return nil
	})
	poll.Eventually(t, 30*time.Second, victim.id+" exits after its removal", func() error {
		if !victim.exited() {
			return errors.New("still running")
		}
		return nil
	})
	if err := victim.Proc.ExitErr(); err != nil {
		t.Fatalf("%s exited with %v, want status 0", victim.id, err)
	}
	raw, err := os.ReadFile(victim.logPath)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		`msg="this node was removed from the cluster: the committed raft configuration no longer lists it;`,
		`msg="removed from the cluster, shutting down"`,
		`msg="kvselect node stopped"`,
	} {
		if !strings.Contains(string(raw), want) {
			t.Fatalf("%s's log lacks %s", victim.id, want)
		}
	}

	c.eventually("the other two keep a leader and list two members", 30*time.Second, func() error {
		for _, node := range c.nodes {
			if node == victim {
				continue
			}
			st, err := clusterStatus(node)
			if err != nil {
				return err
			}
			if st.Leader.ID == "" || st.Leader.ID == victim.id || len(st.Members) != 2 {
				return fmt.Errorf("%s: leader %q, members %+v", node.id, st.Leader.ID, st.Members)
			}
		}
		return nil
	})
	c.terminateAll(30 * time.Second)
}
