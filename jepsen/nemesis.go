package jepsen

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/kvselect/kvselect/api"
	"github.com/kvselect/kvselect/client"
	"github.com/kvselect/kvselect/internal/poll"
	"github.com/kvselect/kvselect/kvsim"
)

// Nemesis is one kind of fault. Inject applies it to a healthy cluster;
// Heal undoes it and returns only when every process runs, every link
// passes and the cluster is healthy again. A Nemesis remembers what it
// did between Inject and Heal, so use one value per run (Nemeses returns
// fresh ones). Both record a NemesisEvent on the cluster.
type Nemesis interface {
	Name() string
	Inject(ctx context.Context, c *Cluster) error
	Heal(ctx context.Context, c *Cluster) error
}

// NemesisEvent is one inject or heal, for nemesis.jsonl and the
// timeline. Time is measured from the cluster's Base (nanoseconds in
// JSON).
type NemesisEvent struct {
	Time    time.Duration `json:"time"`
	Nemesis string        `json:"nemesis"`
	Phase   string        `json:"phase"` // "inject" or "heal"
	Detail  string        `json:"detail"`
	// Down are the nodes an inject takes down on purpose (killed,
	// stopped or paused) until the heal: their own failed selections
	// meanwhile are the fault, not unavailability (MaxUnavailability).
	Down []int `json:"down,omitempty"`
}

// Nemesis phases.
const (
	PhaseInject = "inject"
	PhaseHeal   = "heal"
)

// RecordEvent appends a nemesis event stamped now; down lists the nodes
// an inject takes down on purpose.
func (c *Cluster) RecordEvent(nemesis, phase, detail string, down ...int) {
	c.RecordEventAt(c.Now(), nemesis, phase, detail, down...)
}

// Now is the time since the cluster's Base, the clock of events and
// histories.
func (c *Cluster) Now() time.Duration { return time.Since(c.cfg.Base) }

// RecordEventAt appends a nemesis event stamped at (from Now): an inject
// that takes nodes down is stamped before it acts, so that requests cut
// short by the kill or the pause fall inside its window.
func (c *Cluster) RecordEventAt(at time.Duration, nemesis, phase, detail string, down ...int) {
	c.evMu.Lock()
	defer c.evMu.Unlock()
	c.events = append(c.events, NemesisEvent{Time: at, Nemesis: nemesis, Phase: phase, Detail: detail, Down: down})
	c.cfg.Logger.Info("nemesis", "nemesis", nemesis, "phase", phase, "detail", detail)
}

// Events are the recorded nemesis events, oldest first.
func (c *Cluster) Events() []NemesisEvent {
	c.evMu.Lock()
	defer c.evMu.Unlock()
	return slices.Clone(c.events)
}

// Nemeses returns a fresh value of every nemesis, in a fixed order.
func Nemeses() []Nemesis {
	return []Nemesis{
		&killNemesis{name: "kill-leader", leader: true},
		&killNemesis{name: "kill-random"},
		&pauseLeader{},
		&partitionNemesis{name: "partition-isolate-leader", split: isolateLeader},
		&partitionNemesis{name: "partition-halves", split: halves},
		&partitionNemesis{name: "partition-bridge", split: bridge},
		&partitionNemesis{name: "partition-one-way", split: oneWay},
		&linkNemesis{name: "latency", apply: func(c *Cluster) string {
			c.SetLatency(50*time.Millisecond, 50*time.Millisecond)
			return "every link: delay 50ms + up to 50ms per chunk"
		}},
		&linkNemesis{name: "flaky", apply: func(c *Cluster) string {
			c.SetFlaky(0.02)
			return "every link: drop a connection with p=0.02 per accept and per chunk"
		}},
		&snapshotCatchUp{},
		&leaderTransfer{},
		&restartAll{},
		&workerLinkCut{},
		&memberRemoveRejoin{},
		&restartAfter{name: "restart-after-60s", down: RestartAfterDown},
	}
}

// NemesisByName returns a fresh nemesis by its Name.
func NemesisByName(name string) (Nemesis, bool) {
	for _, n := range Nemeses() {
		if n.Name() == name {
			return n, true
		}
	}
	return nil, false
}

// SelectNemeses returns fresh values of the nemeses named in list
// (comma-separated, in Nemeses' order), or every one when list is empty.
// An unknown name is an error that lists the known ones, so that a typo
// in JEPSEN_NEMESIS runs nothing by mistake rather than passing.
func SelectNemeses(list string) ([]Nemesis, error) {
	all := Nemeses()
	if strings.TrimSpace(list) == "" {
		return all, nil
	}
	want := map[string]bool{}
	for _, name := range strings.Split(list, ",") {
		want[strings.TrimSpace(name)] = true
	}
	var out []Nemesis
	var names []string
	for _, n := range all {
		names = append(names, n.Name())
		if want[n.Name()] {
			out = append(out, n)
			delete(want, n.Name())
		}
	}
	if len(want) > 0 {
		unknown := make([]string, 0, len(want))
		for name := range want {
			unknown = append(unknown, strconv.Quote(name))
		}
		slices.Sort(unknown)
		return nil, fmt.Errorf("no nemesis named %s; the nemeses are %s", strings.Join(unknown, ", "), strings.Join(names, ", "))
	}
	return out, nil
}

// others are the node indexes besides i.
func others(c *Cluster, i int) []int {
	var out []int
	for j := range c.Size() {
		if j != i {
			out = append(out, j)
		}
	}
	return out
}

func nodeNames(idx []int) string {
	names := make([]string, len(idx))
	for k, i := range idx {
		names[k] = NodeID(i)
	}
	return strings.Join(names, ",")
}

// healAndRecord recovers the whole cluster and records the heal.
func healAndRecord(ctx context.Context, c *Cluster, name, detail string) error {
	err := c.Recover(ctx)
	if err != nil {
		detail += "; not healthy: " + err.Error()
	}
	c.RecordEvent(name, PhaseHeal, detail)
	return err
}

// killNemesis kills (SIGKILL) the leader or a random node; Heal restarts
// it on its data dir.
type killNemesis struct {
	name   string
	leader bool

	mu     sync.Mutex
	victim int
}

func (n *killNemesis) Name() string { return n.name }

func (n *killNemesis) Inject(ctx context.Context, c *Cluster) error {
	victim := rand.N(c.Size())
	if n.leader {
		var err error
		if victim, err = c.WaitLeader(ctx, nil); err != nil {
			return err
		}
	}
	n.mu.Lock()
	n.victim = victim
	n.mu.Unlock()
	at := c.Now()
	c.Kill(victim)
	c.RecordEventAt(at, n.name, PhaseInject, "SIGKILL "+NodeID(victim), victim)
	return nil
}

func (n *killNemesis) Heal(ctx context.Context, c *Cluster) error {
	n.mu.Lock()
	victim := n.victim
	n.mu.Unlock()
	return healAndRecord(ctx, c, n.name, "restart "+NodeID(victim))
}

// pauseLeader stops the leader with SIGSTOP until the others have
// elected a new one, so the pause outlasts the election timeout; Heal
// resumes it (it finds itself deposed).
type pauseLeader struct {
	mu     sync.Mutex
	victim int
}

func (n *pauseLeader) Name() string { return "pause-leader" }

func (n *pauseLeader) Inject(ctx context.Context, c *Cluster) error {
	leader, err := c.WaitLeader(ctx, nil)
	if err != nil {
		return err
	}
	n.mu.Lock()
	n.victim = leader
	n.mu.Unlock()
	at := c.Now()
	if err := c.Pause(leader); err != nil {
		return err
	}
	detail := "SIGSTOP " + NodeID(leader)
	if c.Size() > 2 {
		next, err := c.WaitLeader(ctx, others(c, leader))
		if err != nil {
			c.RecordEventAt(at, n.Name(), PhaseInject, detail+"; no new leader: "+err.Error(), leader)
			return err
		}
		detail += "; " + NodeID(next) + " elected"
	}
	c.RecordEventAt(at, n.Name(), PhaseInject, detail, leader)
	return nil
}

func (n *pauseLeader) Heal(ctx context.Context, c *Cluster) error {
	n.mu.Lock()
	victim := n.victim
	n.mu.Unlock()
	return healAndRecord(ctx, c, n.Name(), "SIGCONT "+NodeID(victim))
}

// partitionNemesis cuts links as split decides; Heal makes them pass.
type partitionNemesis struct {
	name  string
	split func(ctx context.Context, c *Cluster) (string, error)
}

func (n *partitionNemesis) Name() string { return n.name }

func (n *partitionNemesis) Inject(ctx context.Context, c *Cluster) error {
	detail, err := n.split(ctx, c)
	if err != nil {
		return err
	}
	c.RecordEvent(n.name, PhaseInject, detail)
	return nil
}

func (n *partitionNemesis) Heal(ctx context.Context, c *Cluster) error {
	return healAndRecord(ctx, c, n.name, "every link passes")
}

func isolateLeader(ctx context.Context, c *Cluster) (string, error) {
	leader, err := c.WaitLeader(ctx, nil)
	if err != nil {
		return "", err
	}
	c.Isolate(leader)
	return "isolate leader " + NodeID(leader), nil
}

// halves splits the nodes at random into a majority and a minority.
func halves(_ context.Context, c *Cluster) (string, error) {
	order := rand.Perm(c.Size())
	major, minor := order[:c.Size()/2+1], order[c.Size()/2+1:]
	slices.Sort(major)
	slices.Sort(minor)
	c.Partition(major, minor)
	return fmt.Sprintf("majority {%s} | minority {%s}", nodeNames(major), nodeNames(minor)), nil
}

// bridge keeps one random node connected to both sides of a cut the
// others cannot cross: {a..., b} and {b, c...}.
func bridge(_ context.Context, c *Cluster) (string, error) {
	if c.Size() < 3 {
		return "", errors.New("partition-bridge needs 3 nodes")
	}
	order := rand.Perm(c.Size())
	b, rest := order[0], order[1:]
	left := append([]int{b}, rest[:len(rest)/2]...)
	right := append([]int{b}, rest[len(rest)/2:]...)
	c.Partition(left, right)
	return fmt.Sprintf("%s bridges {%s} and {%s}", NodeID(b), nodeNames(left), nodeNames(right)), nil
}

// oneWay cuts the leader's links to one follower: the leader's heartbeats
// stop reaching it, while its own connections to the leader still work.
func oneWay(ctx context.Context, c *Cluster) (string, error) {
	leader, err := c.WaitLeader(ctx, nil)
	if err != nil {
		return "", err
	}
	fs := others(c, leader)
	to := fs[rand.N(len(fs))]
	c.OneWay(leader, to)
	return fmt.Sprintf("one-way: %s -> %s blackholed", NodeID(leader), NodeID(to)), nil
}

// linkNemesis degrades every link; Heal makes them pass.
type linkNemesis struct {
	name  string
	apply func(c *Cluster) string
}

func (n *linkNemesis) Name() string { return n.name }

func (n *linkNemesis) Inject(_ context.Context, c *Cluster) error {
	c.RecordEvent(n.name, PhaseInject, n.apply(c))
	return nil
}

func (n *linkNemesis) Heal(ctx context.Context, c *Cluster) error {
	return healAndRecord(ctx, c, n.name, "every link passes")
}

// workerLinkCut blackholes a random node's links to every worker, so it
// misses the KV events published meanwhile while the other nodes keep
// them. One worker's engine restarts just before the cut (every node
// sees that) and again during it: the new engine's counter starts over
// and then, while the node is away, passes the last number the node
// applied, so sequence numbers alone no longer show the restart (as with
// a vLLM engine crash-looping while a node is partitioned from it). The
// inject proves both claims: the node counted the first restart, and not
// the second. Heal lets the links pass and waits until the node follows
// every worker again. Replay on reconnect must repair its index: the
// run's index check compares it with the others'.
type workerLinkCut struct {
	mu     sync.Mutex
	victim int
	cycle  int
}

func (*workerLinkCut) Name() string { return "worker-link-cut" }

func (n *workerLinkCut) Inject(ctx context.Context, c *Cluster) error {
	victim := rand.N(c.Size())
	n.mu.Lock()
	n.victim = victim
	n.cycle++
	cycle := n.cycle
	n.mu.Unlock()
	detail := fmt.Sprintf("%s loses its %d worker links", NodeID(victim), len(c.WorkerLinks(victim)))
	ids := c.WorkerIDs()
	if len(ids) == 0 {
		c.CutWorkers(victim, true)
		c.RecordEvent(n.Name(), PhaseInject, detail)
		return nil
	}
	w := ids[cycle%len(ids)]
	// serve has w store k prompts never served before, so its engine
	// publishes k messages whatever it has cached, and the old and the
	// new engine publish different blocks under the same numbers.
	served := 0
	serve := func(k int) error {
		for range k {
			served++
			toks := make([]uint32, 32)
			for t := range toks {
				toks[t] = uint32(3_000_000_000 + cycle*10_000 + served*100 + t)
			}
			// The index check looks at these prompts too: a block one
			// node kept from the old engine shows in their rows only.
			c.AddIndexProbe(api.Prompt{ModelName: c.cfg.Model, TokenIDs: toks})
			if _, err := c.Sim().Prompt(ctx, w, 0, toks); err != nil {
				return err
			}
		}
		return nil
	}
	restart := func() error { return c.Sim().Restart(ctx, w, kvsim.AllRanks) }
	// live publishes until the victim has applied one more message. A
	// node that has just reconnected (after restart-all, say) may not
	// have its subscription in place yet, and a PUB drops what it
	// publishes before that: the victim would then miss the new engine's
	// first message too, and with it the restart this nemesis needs it to
	// see (seen once in make test's smoke run, right after restart-all).
	live := func() error {
		seq0, _, err := c.listenerState(ctx, victim, w)
		if err != nil {
			return err
		}
		for range 20 {
			if err := serve(1); err != nil {
				return err
			}
			pctx, cancel := context.WithTimeout(ctx, time.Second)
			err := poll.Until(pctx, pollEvery, NodeID(victim)+" applies a new message", func(ctx context.Context) error {
				seq, _, err := c.listenerState(ctx, victim, w)
				if err == nil && seq == seq0 {
					err = fmt.Errorf("%s still at seq %d of worker %d", NodeID(victim), seq, w)
				}
				return err
			})
			cancel()
			if err == nil || ctx.Err() != nil {
				return err
			}
		}
		return fmt.Errorf("%s applied none of 20 messages of worker %d", NodeID(victim), w)
	}
	before, err := c.listenerRestarts(ctx, victim, w)
	var atCut uint64
	for _, step := range []func() error{
		live, // the old engine has published, and the victim follows it
		restart,
		func() error { return serve(1) }, // the new one's seq 0 shows the restart
		func() error {
			return poll.Until(ctx, pollEvery, NodeID(victim)+" sees the engine restart", func(ctx context.Context) error {
				got, err := c.listenerRestarts(ctx, victim, w)
				if err == nil && got <= before {
					err = fmt.Errorf("%s counted %d restarts of worker %d", NodeID(victim), got, w)
				}
				return err
			})
		},
		func() error {
			c.CutWorkers(victim, true)
			var err error
			atCut, err = c.listenerRestarts(ctx, victim, w)
			return err
		},
		restart,
		func() error { return serve(8) }, // past the victim's last, unseen
		func() error {
			// The claim is a restart the victim did not see: prove it.
			got, err := c.listenerRestarts(ctx, victim, w)
			if err == nil && got != atCut {
				err = fmt.Errorf("%s counted %d restarts of worker %d during the cut, %d at it: the cut let the restart through", NodeID(victim), got, w, atCut)
			}
			return err
		},
	} {
		if err == nil {
			err = step()
		}
	}
	if err != nil {
		c.CutWorkers(victim, true)
		c.RecordEvent(n.Name(), PhaseInject, detail+"; engine restarts failed: "+err.Error())
		return err
	}
	c.RecordEvent(n.Name(), PhaseInject, fmt.Sprintf("%s; worker %d's engine restarted before and during the cut", detail, w))
	return nil
}

func (n *workerLinkCut) Heal(ctx context.Context, c *Cluster) error {
	n.mu.Lock()
	victim := n.victim
	n.mu.Unlock()
	err := c.Recover(ctx)
	if err == nil {
		err = c.waitWorkersFollowed(ctx)
	}
	detail := NodeID(victim) + "'s worker links pass"
	if err != nil {
		detail += "; not healthy: " + err.Error()
	}
	c.RecordEvent(n.Name(), PhaseHeal, detail)
	return err
}

// leaderTransfer asks the leader to step down (POST /cluster/stepdown)
// while the workload runs, and waits for another leader.
type leaderTransfer struct{}

func (leaderTransfer) Name() string { return "leader-transfer" }

func (n leaderTransfer) Inject(ctx context.Context, c *Cluster) error {
	var notes []string
	for attempt := 1; ; attempt++ {
		leader, term, err := c.leaderAndTerm(ctx)
		if err != nil {
			return err
		}
		sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		_, err = c.Node(leader).Client.StepDown(sctx)
		cancel()
		if err != nil {
			// A transfer whose target does not win within an election
			// timeout fails ("leadership transfer timeout") and the leader
			// carries on: the same hint-not-guarantee as a re-election
			// below (seen right after a snapshot-catch-up heal, while the
			// target's links were still coming back). Retry, bounded.
			notes = append(notes, fmt.Sprintf("stepdown %s failed: %v", NodeID(leader), err))
			if attempt == leaderTransferAttempts {
				err := fmt.Errorf("step down %s: %d attempts failed: %w", NodeID(leader), attempt, err)
				c.RecordEvent(n.Name(), PhaseInject, strings.Join(notes, "; "))
				return err
			}
			continue
		}
		next, nextTerm, err := c.leaderAfterStepDown(ctx, leader, term)
		if err != nil {
			c.RecordEvent(n.Name(), PhaseInject, fmt.Sprintf("stepdown %s acknowledged; %v", NodeID(leader), err))
			return err
		}
		if next != leader {
			notes = append(notes, fmt.Sprintf("stepdown %s; %s leads in term %d", NodeID(leader), NodeID(next), nextTerm))
			c.RecordEvent(n.Name(), PhaseInject, strings.Join(notes, "; "))
			return nil
		}
		// The old leader did give up leadership (the term moved on), but
		// the node it handed over to lost its election and the old
		// leader won the next one. Raft allows that: a transfer is a
		// hint, not a guarantee (one cause seen here: the target's first
		// vote requests went out on pooled connections a healed
		// partition had reset). Try again, a bounded number of times.
		notes = append(notes, fmt.Sprintf("stepdown %s; re-elected in term %d", NodeID(leader), nextTerm))
		if attempt == leaderTransferAttempts {
			err := fmt.Errorf("%s re-elected after %d step-downs", NodeID(leader), attempt)
			c.RecordEvent(n.Name(), PhaseInject, strings.Join(notes, "; ")+"; "+err.Error())
			return err
		}
	}
}

// leaderTransferAttempts bounds the step-downs leader-transfer tries
// before it calls a leader that keeps winning again a finding.
const leaderTransferAttempts = 3

// leaderAndTerm is the agreed leader and its term.
func (c *Cluster) leaderAndTerm(ctx context.Context) (int, uint64, error) {
	leader, err := c.WaitLeader(ctx, nil)
	if err != nil {
		return 0, 0, err
	}
	st, err := c.Status(ctx, leader)
	if err != nil {
		return 0, 0, fmt.Errorf("%s: %w", NodeID(leader), err)
	}
	return leader, st.Term, nil
}

// leaderAfterStepDown waits until the agreed leader is another node, or
// the same node in a later term. A transfer is one attempt per call: if
// the old leader still leads in its old term after a few election
// timeouts, that is a finding, not something to retry.
func (c *Cluster) leaderAfterStepDown(ctx context.Context, old int, oldTerm uint64) (int, uint64, error) {
	wctx, cancel := context.WithTimeout(ctx, 10*c.cfg.ElectionTimeout)
	defer cancel()
	var next int
	var term uint64
	err := poll.Until(wctx, pollEvery, "another node leads after a step-down", func(ctx context.Context) error {
		var err error
		if next, err = c.Leader(ctx); err != nil {
			return err
		}
		st, err := c.Status(ctx, next)
		if err != nil {
			return err
		}
		if term = st.Term; next == old && term <= oldTerm {
			return fmt.Errorf("%s still leads in term %d", NodeID(old), term)
		}
		return nil
	})
	return next, term, err
}

func (n leaderTransfer) Heal(ctx context.Context, c *Cluster) error {
	return healAndRecord(ctx, c, n.Name(), "nothing to undo")
}

// restartAll kills every node at once (SIGKILL) and starts them all again
// on their data dirs: every acknowledged write must survive.
type restartAll struct{}

func (restartAll) Name() string { return "restart-all" }

func (n restartAll) Inject(_ context.Context, c *Cluster) error {
	at := c.Now()
	for i := range c.Size() {
		c.Kill(i)
	}
	var errs []error
	for i := range c.Size() {
		errs = append(errs, c.Restart(i))
	}
	c.RecordEventAt(at, n.Name(), PhaseInject, "SIGKILL every node, then start every node", others(c, -1)...)
	return errors.Join(errs...)
}

func (n restartAll) Heal(ctx context.Context, c *Cluster) error {
	return healAndRecord(ctx, c, n.Name(), "wait until healthy")
}

// Scratch catalog entries the snapshot nemesis writes to grow the Raft
// log: a model of their own, so workloads never see them.
const (
	snapshotScratchModel = "jepsen-nemesis"
	snapshotScratchID    = 1 << 40
)

// snapshotCatchUp isolates a follower, then writes to the catalog until
// the leader has compacted its log past everything the follower holds;
// Heal reconnects it, waits until it has caught up, and checks that it
// did so by installing the leader's snapshot ("Installed remote
// snapshot" in its log since the inject): a claim the nemesis proves.
//
// The leader runs with --raft-snapshot-interval 1s and some
// --raft-trailing-logs t (Config.TrailingLogs unless ExtraArgs says
// otherwise), which the nemesis reads back from the leader's own command
// line: after a snapshot at index s the leader keeps entries from
// s - t + 1 on, so once s passes the follower's index by t plus
// snapshotMargin (entries the follower may hold past what it applied)
// the follower can only catch up from the snapshot.
type snapshotCatchUp struct {
	mu        sync.Mutex
	follower  int
	logFrom   int64 // the follower's log size at the inject
	compacted bool  // the leader's log no longer reaches the follower's
}

func (*snapshotCatchUp) Name() string { return "snapshot-catch-up" }

// snapshotMargin covers entries a follower may hold beyond the index it
// reports applied (appended, not yet applied, when it was cut off).
const snapshotMargin = 64

func (n *snapshotCatchUp) Inject(ctx context.Context, c *Cluster) error {
	leader, err := c.WaitLeader(ctx, nil)
	if err != nil {
		return err
	}
	fs := others(c, leader)
	f := fs[rand.N(len(fs))]
	logFrom := fileSize(c.LogPath(f))
	c.Isolate(f)
	// Read after the cut: nothing reaches the follower past this.
	st, err := c.Status(ctx, f)
	if err != nil {
		return err
	}
	behind := max(st.AppliedIndex, st.CommitIndex)
	eff, err := c.Node(leader).Opts.Effective()
	if err != nil {
		return err
	}
	trailing := eff.Cluster.TrailingLogs
	need := behind + trailing + snapshotMargin
	n.mu.Lock()
	n.follower, n.logFrom, n.compacted = f, logFrom, false
	n.mu.Unlock()

	// Concurrent upserts through the majority's leader until a snapshot
	// on it covers an index past the follower's by the trailing logs.
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	majority := fs[:0:0]
	for _, i := range c.Live() {
		if i != f {
			majority = append(majority, i)
		}
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	writes := 0
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			urls := make([]string, len(majority))
			for k, i := range majority {
				urls[k] = c.URL(i)
			}
			cl, err := client.New(client.Config{Addrs: urls, Token: c.Token()})
			if err != nil {
				return
			}
			for seq := 0; wctx.Err() == nil; seq++ {
				_, err := cl.RegisterWorker(wctx, api.WorkerSpec{WorkerID: snapshotScratchID + uint64(w),
					ModelName: snapshotScratchModel, Endpoint: "http://127.0.0.1:1/" + strconv.Itoa(seq)})
				if err == nil {
					mu.Lock()
					writes++
					mu.Unlock()
				}
			}
		}()
	}
	var snap uint64
	err = poll.Until(ctx, pollEvery, "the leader compacts its log past the isolated follower", func(context.Context) error {
		li, err := c.LeaderAmong(ctx, majority)
		if err != nil {
			return err
		}
		if snap = latestSnapshotIndex(filepath.Join(c.cfg.Dir, NodeID(li))); snap <= need {
			return fmt.Errorf("%s's latest snapshot is at %d, want past %d (follower at %d, %d trailing logs)",
				NodeID(li), snap, need, behind, trailing)
		}
		return nil
	})
	cancel()
	wg.Wait()
	detail := fmt.Sprintf("isolate %s at index %d; %d writes; leader snapshot at %d, keeping %d trailing logs", NodeID(f), behind, writes, snap, trailing)
	if err == nil {
		n.mu.Lock()
		n.compacted = true
		n.mu.Unlock()
		detail += "; log compacted past the follower: it must install the snapshot"
	}
	c.RecordEvent(n.Name(), PhaseInject, detail)
	return err
}

func (n *snapshotCatchUp) Heal(ctx context.Context, c *Cluster) error {
	n.mu.Lock()
	f, from, compacted := n.follower, n.logFrom, n.compacted
	n.mu.Unlock()
	detail := "reconnect " + NodeID(f)
	err := c.Recover(ctx)
	if err == nil && compacted {
		// Caught up (Recover waits for its catalog index), so the install
		// is in its log; give the line a moment to be written.
		wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		err = poll.Until(wctx, pollEvery, NodeID(f)+" logs the snapshot it installed", func(context.Context) error {
			return snapshotInstalledSince(c.LogPath(f), from)
		})
		cancel()
		if err == nil {
			detail += "; it installed the leader's snapshot"
		}
	}
	if err != nil {
		detail += "; " + err.Error()
	}
	c.RecordEvent(n.Name(), PhaseHeal, detail)
	return err
}

// installedSnapshotLine is what hashicorp/raft logs (at info) on a
// follower once it has installed a snapshot the leader sent.
const installedSnapshotLine = `msg="Installed remote snapshot"`

// snapshotInstalledSince returns nil when the log at path, from byte
// offset from on, shows an installed snapshot.
func snapshotInstalledSince(path string, from int64) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	if from > int64(len(b)) {
		from = 0 // the log was replaced
	}
	if !strings.Contains(string(b[from:]), installedSnapshotLine) {
		return fmt.Errorf("the log was compacted past it, but %s shows no %s since the inject", filepath.Base(path), installedSnapshotLine)
	}
	return nil
}

// fileSize is the size of the file at path (0 when it cannot be read).
func fileSize(path string) int64 {
	fi, err := os.Stat(path)
	if err != nil {
		return 0
	}
	return fi.Size()
}

// latestSnapshotIndex reads the highest index among a node's Raft
// snapshots (hashicorp/raft names them term-index-millis under
// snapshots/); 0 when there is none.
func latestSnapshotIndex(dataDir string) uint64 {
	entries, err := os.ReadDir(filepath.Join(dataDir, "snapshots"))
	if err != nil {
		return 0
	}
	var best uint64
	for _, e := range entries {
		parts := strings.Split(e.Name(), "-")
		if !e.IsDir() || len(parts) != 3 || strings.HasSuffix(e.Name(), ".tmp") {
			continue
		}
		if idx, err := strconv.ParseUint(parts[1], 10, 64); err == nil && idx > best {
			best = idx
		}
	}
	return best
}
