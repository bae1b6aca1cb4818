package cluster

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
)

// raftLogState judges some of hashicorp/raft's lines by what the node is
// doing, which raft's own levels cannot know:
//
//   - A leadership transfer this node asked for (kvselectctl cluster
//     stepdown, the hand-over at shutdown, a leader removing itself) ends
//     with raft's "peer has newer term, stopping replication" at ERROR,
//     once per follower: the target won the election the transfer asked
//     for. While a planned transfer is under way it is logged at INFO;
//     unplanned, the line stays an ERROR.
//   - A node without a quorum (two of three down) campaigns forever:
//     raft logs every election round with three lines, about 120 a minute
//     at the default 1 s election timeout. The first round of a campaign
//     is logged as raft logs it, so the first failure shows; later rounds
//     go to DEBUG, with one WARN summary every campaignSummaryEvery rounds
//     and an INFO line saying how many rounds it took when the campaign
//     ends (election won, or a leader found).
type raftLogState struct {
	// planned is set while a leadership transfer this node asked for is
	// under way: from the request until the node leads again, or the
	// transfer failed with the node still leading (transferLeadership).
	planned atomic.Bool

	mu       sync.Mutex
	campaign campaign
}

// campaign is the election rounds since this node last was, or knew, a
// leader.
type campaign struct {
	rounds  int // 0: not campaigning
	started time.Time
	term    any   // of the last round
	outcome []any // the last round's tally, as raft logged it
}

// campaignSummaryEvery is how many election rounds one WARN summary
// stands for: about two a minute at the default election timeout
// (rounds take 1 to 2 timeouts).
const campaignSummaryEvery = 20

// raft's messages this file judges, pinned by tests (a raft upgrade that
// renames one shows there).
const (
	msgStaleTerm       = "peer has newer term, stopping replication"
	msgCandidate       = "entering candidate state"
	msgPreVoteFailed   = "pre-vote campaign failed, waiting for election timeout"
	msgPreVoteWon      = "pre-vote successful, starting election"
	msgElectionTimeout = "Election timeout reached, restarting election"
	msgElectionWon     = "election won"
	msgLeader          = "entering leader state"
	msgFollower        = "entering follower state"
)

// summary is a line the state adds to raft's.
type summary struct {
	level hclog.Level
	msg   string
	args  []any
}

// judge returns the level raft's line is logged at, and a summary line to
// log before it, if any.
func (s *raftLogState) judge(level hclog.Level, msg string, args []any) (hclog.Level, *summary) {
	switch msg {
	case msgStaleTerm:
		if s.planned.Load() {
			return hclog.Info, nil
		}
		return level, nil
	case msgLeader:
		s.planned.Store(false)
		return level, nil
	case msgCandidate, msgPreVoteFailed, msgPreVoteWon, msgElectionTimeout, msgElectionWon, msgFollower:
	default:
		return level, nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	c := &s.campaign
	switch msg {
	case msgCandidate:
		c.rounds++
		if c.rounds == 1 {
			c.started = time.Now()
		}
		c.term = argValue(args, "term")
		if c.rounds > 1 && (c.rounds-1)%campaignSummaryEvery == 0 {
			return hclog.Debug, &summary{hclog.Warn, "still no leader: this node keeps campaigning without a quorum of voters",
				append([]any{"rounds", c.rounds, "term", c.term, "campaigning_for", time.Since(c.started).Round(time.Second)}, c.outcome...)}
		}
	case msgPreVoteFailed, msgPreVoteWon:
		c.outcome = c.outcome[:0]
		for _, k := range []string{"tally", "refused", "votesNeeded"} {
			if v := argValue(args, k); v != nil {
				c.outcome = append(c.outcome, k, v)
			}
		}
	case msgElectionWon, msgFollower:
		rounds := c.rounds
		*c = campaign{}
		if rounds > 1 {
			return level, &summary{hclog.Info, "election campaign over", []any{"rounds", rounds, "ended_by", msg}}
		}
		return level, nil
	}
	if c.rounds > 1 {
		return hclog.Debug, nil
	}
	return level, nil
}

// argValue is the value of key in raft's key/value args; nil when absent.
func argValue(args []any, key string) any {
	for i := 0; i+1 < len(args); i += 2 {
		if k, ok := args[i].(string); ok && k == key {
			return args[i+1]
		}
	}
	return nil
}
