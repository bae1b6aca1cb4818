package http

import (
	"encoding/json"
	"log/slog"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/kvselect/kvselect/api"
	"github.com/kvselect/kvselect/internal/authtoken"
	"github.com/kvselect/kvselect/internal/testlog"
)

// Test_Readyz judges every kind of cluster status GET /readyz meets, through
// the fake's /cluster/status: each reason for a 503 with its code and body,
// and the two ways of being ready. HEAD answers the same status.
func Test_Readyz(t *testing.T) {
	voters := func(ids ...string) []api.Member {
		var ms []api.Member
		for _, id := range ids {
			ms = append(ms, api.Member{ID: id, Suffrage: api.SuffrageVoter})
		}
		return ms
	}
	// caughtUp is a follower of n2 that has applied everything it knows.
	caughtUp := api.ClusterStatus{NodeID: "n1", State: api.StateFollower, Leader: api.LeaderRef{ID: "n2"},
		CommitIndex: 12, AppliedIndex: 12, CatalogIndex: 9, Members: voters("n1", "n2", "n3")}
	with := func(change func(st *api.ClusterStatus)) api.ClusterStatus {
		st := caughtUp
		st.Members = append([]api.Member(nil), caughtUp.Members...)
		change(&st)
		return st
	}
	tests := []struct {
		name     string
		st       api.ClusterStatus
		then     *api.ClusterStatus // the status from the second call on
		reason   string             // "" for ready
		suffrage string
		member   bool
		inError  string
		removed  bool // the node saw itself removed (cluster.Node.Removed)
	}{
		{name: "caught-up follower", st: caughtUp, member: true, suffrage: api.SuffrageVoter},
		{name: "leader", st: with(func(st *api.ClusterStatus) { st.State, st.Leader.ID = api.StateLeader, "n1" }),
			member: true, suffrage: api.SuffrageVoter},
		{name: "applied past the commit index it knows", st: with(func(st *api.ClusterStatus) { st.AppliedIndex = 13 }),
			member: true, suffrage: api.SuffrageVoter},
		{name: "shut down", st: with(func(st *api.ClusterStatus) { st.State, st.Leader.ID, st.Members = api.StateShutdown, "", nil }),
			reason: api.ReadyzShutDown, inError: "shut down"},
		{name: "removed from the configuration", st: with(func(st *api.ClusterStatus) { st.Members = voters("n2", "n3") }),
			reason: api.ReadyzNotMember, inError: "not in the Raft configuration"},
		{name: "removed, though its own configuration still lists it", st: caughtUp, removed: true,
			reason: api.ReadyzNotMember, suffrage: api.SuffrageVoter, inError: "removed from the cluster"},
		{name: "a joiner not yet promoted", st: with(func(st *api.ClusterStatus) { st.Members[0].Suffrage = api.SuffrageNonvoter }),
			reason: api.ReadyzNotVoter, member: true, suffrage: api.SuffrageNonvoter, inError: "Nonvoter"},
		{name: "an election", st: with(func(st *api.ClusterStatus) { st.State, st.Leader.ID = api.StateCandidate, "" }),
			reason: api.ReadyzNoLeader, member: true, suffrage: api.SuffrageVoter, inError: "no leader"},
		{name: "restarted, nothing applied, no append yet",
			st:     with(func(st *api.ClusterStatus) { st.CommitIndex, st.AppliedIndex, st.CatalogIndex = 0, 0, 0 }),
			reason: api.ReadyzNoCommitIndex, member: true, suffrage: api.SuffrageVoter, inError: "no commit index"},
		{name: "restarted from a snapshot, no append yet",
			st:     with(func(st *api.ClusterStatus) { st.CommitIndex, st.AppliedIndex = 0, 40 }),
			reason: api.ReadyzNoCommitIndex, member: true, suffrage: api.SuffrageVoter, inError: "no commit index"},
		{name: "applying", st: with(func(st *api.ClusterStatus) { st.AppliedIndex = 7 }),
			reason: api.ReadyzApplying, member: true, suffrage: api.SuffrageVoter, inError: "applied index 7 is behind commit index 12"},
		{name: "applying what it knew while more commits", st: with(func(st *api.ClusterStatus) { st.AppliedIndex = 11 }),
			then:   ptr(with(func(st *api.ClusterStatus) { st.AppliedIndex, st.CommitIndex = 11, 14 })),
			reason: api.ReadyzApplying, member: true, suffrage: api.SuffrageVoter, inError: "applied index 11 is behind commit index 12"},
		{name: "a write committed a moment before it is applied", st: with(func(st *api.ClusterStatus) { st.AppliedIndex = 11 }),
			then:   ptr(with(func(st *api.ClusterStatus) { st.AppliedIndex, st.CommitIndex = 12, 13 })),
			member: true, suffrage: api.SuffrageVoter},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeNode()
			if tc.removed {
				f.removed = make(chan struct{})
				close(f.removed)
			}
			var calls atomic.Int64
			f.status = func() api.ClusterStatus {
				if calls.Add(1) > 1 && tc.then != nil {
					return *tc.then
				}
				return tc.st
			}
			final := tc.st
			if tc.then != nil {
				final = *tc.then
			}
			url := serve(t, f.service()) + api.PathReadyz
			want := http.StatusOK
			if tc.reason != "" {
				want = http.StatusServiceUnavailable
			}
			status, hdr, raw := call(t, "GET", url, "")
			if status != want || hdr.Get("Content-Type") != "application/json" {
				t.Fatalf("GET = %d %s %s, want %d", status, hdr.Get("Content-Type"), raw, want)
			}
			got := decodeReadyz(t, raw)
			if got.Ready != (tc.reason == "") || got.Reason != tc.reason || got.Member != tc.member || got.Suffrage != tc.suffrage {
				t.Fatalf("body %s: want ready %v, reason %q, member %v, suffrage %q", raw, tc.reason == "", tc.reason, tc.member, tc.suffrage)
			}
			if got.NodeID != "n1" || got.State != final.State || got.Leader != final.Leader.ID || got.CommitIndex != final.CommitIndex ||
				got.AppliedIndex != final.AppliedIndex || got.CatalogIndex != final.CatalogIndex {
				t.Fatalf("body %s does not report the status %+v", raw, final)
			}
			if tc.reason == "" {
				if got.Error != "" || got.Code != "" {
					t.Fatalf("a ready answer with an error: %s", raw)
				}
			} else if got.Code != api.CodeNotReady || !strings.Contains(got.Error, tc.inError) {
				t.Fatalf("body %s: want code not_ready and an error that says %q", raw, tc.inError)
			}
			calls.Store(0)
			if status, _, raw := call(t, "HEAD", url, ""); status != want || raw != "" {
				t.Fatalf("HEAD = %d %q, want %d and no body", status, raw, want)
			}
		})
	}
}

// Test_ReadyzIsOpenAndQuiet: a probe carries no token, so /readyz (and
// /ready, SPEC §11) is open like /health even with --auth-scope all; and
// the 503 a starting node answers every few seconds is no warning in the
// log.
func Test_ReadyzIsOpenAndQuiet(t *testing.T) {
	var logs testlog.Buffer
	f := newFakeNode()
	f.status = func() api.ClusterStatus { return api.ClusterStatus{NodeID: "n1", State: api.StateCandidate} }
	url := serve(t, f.service(func(cfg *Config) {
		cfg.Auth, cfg.Scope = authtoken.NewHolder("s3cret"), ScopeAll
		cfg.Logger = logs.Logger(slog.LevelWarn)
	}))
	if status, _, raw := call(t, "GET", url+api.PathReady, ""); status != http.StatusServiceUnavailable {
		t.Fatalf("/ready without a token under --auth-scope all = %d %s, want 503 (open, no worker)", status, raw)
	}
	for range 3 {
		if status, _, raw := call(t, "GET", url+api.PathReadyz, ""); status != http.StatusServiceUnavailable ||
			!strings.Contains(raw, `"reason":"not_member"`) {
			t.Fatalf("/readyz without a token = %d %s, want 503 not_member", status, raw)
		}
	}
	if logs.String() != "" {
		t.Fatalf("/readyz's 503 logged:\n%s", logs.String())
	}
}

func ptr[T any](v T) *T { return &v }

// latch stands in for the node's catch-up latch (server/readiness.go).
type latch bool

func (l latch) CaughtUp() bool { return bool(l) }

// Test_ReadyzForSelection judges GET /readyz?for=selection, the pod
// readiness probe (SPEC §3.2): once the node has caught up, losing the
// leader or the quorum does not take it away, but a shutdown, a removal or
// a recovery still running does; before that, the status says why. The
// body reports the latch and the recovery; HEAD answers the same status.
func Test_ReadyzForSelection(t *testing.T) {
	caughtUp := api.ClusterStatus{NodeID: "n1", State: api.StateFollower, Leader: api.LeaderRef{ID: "n2"},
		CommitIndex: 12, AppliedIndex: 12, CatalogIndex: 9,
		Members: []api.Member{{ID: "n1", Suffrage: api.SuffrageVoter}, {ID: "n2", Suffrage: api.SuffrageVoter}}}
	with := func(change func(st *api.ClusterStatus)) api.ClusterStatus {
		st := caughtUp
		st.Members = append([]api.Member(nil), caughtUp.Members...)
		change(&st)
		return st
	}
	// alone is the node after the other two stopped: no leader, and
	// hashicorp/raft keeps the commit index it had learned.
	alone := with(func(st *api.ClusterStatus) { st.State, st.Leader.ID = api.StateCandidate, "" })
	tests := []struct {
		name       string
		st         api.ClusterStatus
		latch      CatchUpReader // nil: judged from the status alone
		recovering bool
		removed    bool
		reason     string // "" for ready
		caughtUp   bool
		inError    string
	}{
		{name: "caught up", st: caughtUp, latch: latch(true), caughtUp: true},
		{name: "caught up once, then lost the leader and the quorum", st: alone, latch: latch(true), caughtUp: true},
		{name: "caught up once, restarted its Raft view from a snapshot", latch: latch(true), caughtUp: true,
			st: with(func(st *api.ClusterStatus) { st.Leader.ID, st.CommitIndex = "", 0 })},
		{name: "caught up once, now a non-voter", latch: latch(true), caughtUp: true,
			st: with(func(st *api.ClusterStatus) { st.Members[0].Suffrage = api.SuffrageNonvoter })},
		{name: "caught up, still recovering the index", st: caughtUp, latch: latch(true), recovering: true, caughtUp: true,
			reason: api.ReadyzRecovering, inError: "recovering its KV index"},
		{name: "caught up once, shut down", latch: latch(true), caughtUp: true,
			st:     with(func(st *api.ClusterStatus) { st.State, st.Leader.ID, st.Members = api.StateShutdown, "", nil }),
			reason: api.ReadyzShutDown, inError: "shut down"},
		{name: "caught up once, removed", st: caughtUp, latch: latch(true), removed: true, caughtUp: true,
			reason: api.ReadyzNotMember, inError: "removed from the cluster"},
		{name: "never caught up: restarted alone", st: with(func(st *api.ClusterStatus) {
			st.State, st.Leader.ID, st.CommitIndex, st.AppliedIndex = api.StateCandidate, "", 0, 40
		}), latch: latch(false), reason: api.ReadyzNoLeader, inError: "has not caught up with a leader since it started"},
		{name: "never caught up: a leader, but no append yet", latch: latch(false),
			st:     with(func(st *api.ClusterStatus) { st.CommitIndex, st.AppliedIndex = 0, 40 }),
			reason: api.ReadyzNoCommitIndex, inError: "no commit index"},
		{name: "never caught up: applying", latch: latch(false),
			st:     with(func(st *api.ClusterStatus) { st.AppliedIndex = 7 }),
			reason: api.ReadyzApplying, inError: "applied index 7 is behind commit index 12"},
		{name: "never caught up, and recovering: the catch-up is named first", latch: latch(false), recovering: true,
			st: alone, reason: api.ReadyzNoLeader, inError: "no leader"},
		{name: "no latch: caught up now", st: caughtUp, caughtUp: true},
		{name: "no latch: no leader now", st: alone, reason: api.ReadyzNoLeader, inError: "no leader"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeNode()
			if tc.removed {
				f.removed = make(chan struct{})
				close(f.removed)
			}
			f.status = func() api.ClusterStatus { return tc.st }
			var flag recoveringFlag
			flag.Store(tc.recovering)
			url := serve(t, f.service(func(c *Config) { c.Recovery, c.CatchUp = &flag, tc.latch })) + api.PathReadyz + "?for=selection"
			want := http.StatusOK
			if tc.reason != "" {
				want = http.StatusServiceUnavailable
			}
			status, _, raw := call(t, "GET", url, "")
			if status != want {
				t.Fatalf("GET = %d %s, want %d", status, raw, want)
			}
			got := decodeReadyz(t, raw)
			if got.Ready != (tc.reason == "") || got.Reason != tc.reason || got.CaughtUp != tc.caughtUp || got.Recovering != tc.recovering {
				t.Fatalf("body %s: want ready %v, reason %q, caught_up %v, recovering %v", raw, tc.reason == "", tc.reason, tc.caughtUp, tc.recovering)
			}
			if got.NodeID != "n1" || got.State != tc.st.State || got.Leader != tc.st.Leader.ID || got.CommitIndex != tc.st.CommitIndex ||
				got.AppliedIndex != tc.st.AppliedIndex {
				t.Fatalf("body %s does not report the status %+v", raw, tc.st)
			}
			if tc.reason == "" {
				if got.Error != "" || got.Code != "" {
					t.Fatalf("a ready answer with an error: %s", raw)
				}
			} else if got.Code != api.CodeNotReady || !strings.Contains(got.Error, tc.inError) {
				t.Fatalf("body %s: want code not_ready and an error that says %q", raw, tc.inError)
			}
			if status, _, raw := call(t, "HEAD", url, ""); status != want || raw != "" {
				t.Fatalf("HEAD = %d %q, want %d and no body", status, raw, want)
			}
		})
	}
}

// Test_ReadyzForUnknown: a for= this node does not know is a 400 that
// names the parameter, not a silent write-readiness answer; the plain
// probe is unchanged by the latch (a node that caught up once but has no
// leader is not write-ready).
func Test_ReadyzForUnknown(t *testing.T) {
	f := newFakeNode()
	f.status = func() api.ClusterStatus {
		return api.ClusterStatus{NodeID: "n1", State: api.StateCandidate, CommitIndex: 5, AppliedIndex: 5,
			Members: []api.Member{{ID: "n1", Suffrage: api.SuffrageVoter}}}
	}
	url := serve(t, f.service(func(c *Config) { c.CatchUp = latch(true) })) + api.PathReadyz
	for _, q := range []string{"?for=writes", "?for=", "?for=Selection", "?for=selection&for=writes"} {
		for _, method := range []string{"GET", "HEAD"} {
			status, _, raw := call(t, method, url+q, "")
			if status != http.StatusBadRequest {
				t.Fatalf("%s %s = %d %s, want 400", method, q, status, raw)
			}
			if method == "GET" && (!strings.Contains(raw, `"code":"bad_request"`) || !strings.Contains(raw, `"error":"for: `)) {
				t.Fatalf("GET %s = %s, want bad_request naming for", q, raw)
			}
		}
	}
	status, _, raw := call(t, "GET", url, "")
	if status != http.StatusServiceUnavailable || !strings.Contains(raw, `"reason":"no_leader"`) || !strings.Contains(raw, `"caught_up":true`) {
		t.Fatalf("plain /readyz without a leader = %d %s, want 503 no_leader (caught_up true)", status, raw)
	}
}

// decodeReadyz decodes a /readyz body, failing the test on a field
// api.Readyz does not declare.
func decodeReadyz(t *testing.T, raw string) api.Readyz {
	t.Helper()
	var got api.Readyz
	dec := json.NewDecoder(strings.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&got); err != nil {
		t.Fatalf("%v: %s", err, raw)
	}
	return got
}
