package http

import (
	"strings"
	"testing"

	"github.com/kvselect/kvselect/api"
	"github.com/kvselect/kvselect/scheduler"
)

// Test_UnknownPartitionOnlyWhenCaughtUp: a partition this node's catalog
// never held is unknown_partition ("do not retry") only on a node that
// has caught up with a leader and applied the index the request asks for.
// A follower that has not applied a registration yet, or a node still
// catching up, answers not_ready with Retry-After: the registration may
// be in entries it has yet to apply. It used to answer unknown_partition
// whatever the node's state, telling a client that had just registered a
// worker through another node never to retry.
func Test_UnknownPartitionOnlyWhenCaughtUp(t *testing.T) {
	caughtUp := api.ClusterStatus{NodeID: "n2", State: api.StateFollower, Leader: api.LeaderRef{ID: "n1"},
		CommitIndex: 7, AppliedIndex: 7}
	behind := caughtUp
	behind.AppliedIndex = 5
	noLeader := caughtUp
	noLeader.Leader.ID = ""
	prompt := `"model_name":"fresh","block_hashes":[1],"sequence_hashes":[1],"isl_tokens":16`
	for _, tc := range []struct {
		name   string
		status api.ClusterStatus
		latch  CatchUpReader // nil: judged from the status
		body   string
		code   api.Code
	}{
		{"caught up", caughtUp, latch(true), `{` + prompt + `}`, api.CodeUnknownPartition},
		{"caught up, no latch", caughtUp, nil, `{` + prompt + `}`, api.CodeUnknownPartition},
		{"applying committed entries", behind, latch(true), `{` + prompt + `}`, api.CodeNotReady},
		{"no leader", noLeader, latch(true), `{` + prompt + `}`, api.CodeNotReady},
		{"not caught up since the start", caughtUp, latch(false), `{` + prompt + `}`, api.CodeNotReady},
		{"min_catalog_index not applied", caughtUp, latch(true), `{` + prompt + `,"min_catalog_index":99}`, api.CodeNotReady},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeNode()
			f.status = func() api.ClusterStatus { return tc.status }
			f.sel = func(scheduler.SelectRequest) (scheduler.Selection, error) {
				return scheduler.Selection{}, scheduler.ErrNotReady
			}
			url := serve(t, f.service(func(c *Config) {
				if tc.latch != nil {
					c.CatchUp = tc.latch
				}
			}))
			status, hdr, body := call(t, "POST", url+"/select", tc.body)
			if status != 503 || !strings.Contains(body, `"code":"`+string(tc.code)+`"`) {
				t.Fatalf("POST /select = %d %s, want 503 %s", status, body, tc.code)
			}
			if retry := hdr.Get("Retry-After") != ""; retry != (tc.code == api.CodeNotReady) {
				t.Fatalf("Retry-After %q with %s", hdr.Get("Retry-After"), tc.code)
			}
		})
	}
}
