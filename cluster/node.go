package cluster

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
	"go.etcd.io/bbolt"

	"github.com/kvselect/kvselect/fsm"
)

// Node is one member of the kvselect Raft cluster: it owns the raft
// instance, its stores and transport, the catalog FSM, and the watcher that
// turns catalog changes into local side effects.
type Node struct {
	cfg     Config
	log     *slog.Logger
	raft    *raft.Raft
	fsm     *fsm.FSM
	store   *raftboltdb.BoltStore
	trans   *raft.NetworkTransport
	stream  *tcpStream // n.trans's stream layer
	watcher *watcher
	metrics *metrics
	health  *peerHealth   // outages of peers, from raft's RPCs (peerhealth.go)
	rpc     *rpcTransport // n.trans as raft uses it
	raftLog *raftLogState // how raft's lines are judged (raftlogs.go)

	obsCh    chan raft.Observation
	observer *raft.Observer
	obsDone  chan struct{}

	metaTurn chan struct{} // one slot: putMetadata's check and write take turns
	// metaKick wakes publishMetadata when this node's own metadata
	// changed (SetReplicaSyncAdvertise); one slot.
	metaKick chan struct{}
	// replicaSync is the replica-sync endpoint this node publishes
	// (Config.ReplicaSyncAdvertise, then SetReplicaSyncAdvertise).
	replicaSync atomic.Pointer[string]

	mu            sync.Mutex
	leaderChanged chan struct{} // closed and replaced on every leader change
	barrierTerm   uint64        // term whose entries are known applied on this leader
	unreachable   map[raft.ServerID]bool
	closed        bool

	hadState bool // the data dir held raft state at Open
	// bootstrapped is set when Open wrote a new cluster's configuration
	// (Bootstrapped).
	bootstrapped bool
	// incarnation is this process's, published in the node metadata
	// (identity.go).
	incarnation uint64
	// rulesHeldBy are the members that held the catalog rules switch
	// back when the leader last looked (publishMetadata's goroutine
	// only), so that it logs each change once.
	rulesHeldBy string
	provider    *dialProvider
	client      *peerClient
	stop        chan struct{} // closed by Close; stops publishMetadata, announceCommits and watchRemoval
	removed     chan struct{} // closed once this node is out of the committed configuration (removal.go)
	wg          sync.WaitGroup
	// announce asks announceCommits for a barrier (AnnounceCommit); one
	// pending request stands for any number.
	announce chan struct{}
	// announced is the commit index a completed announcement carried to
	// the followers: writes up to it need no barrier of their own.
	// requested is the highest index AnnounceCommit was asked to carry.
	announced, requested atomic.Uint64
	// leases is the leader's lease deadlines (lease.go).
	leases leaseBook
	// leaseTicks counts expireLeases rounds (tests wait on it).
	leaseTicks atomic.Uint64
	// metaRounds counts publishMetadata passes (MetadataRounds).
	metaRounds atomic.Uint64
}

// Open starts a node in cfg.DataDir. A data dir with Raft state resumes it
// (the catalog is rebuilt from snapshot and log) and ignores
// InitialCluster and Join. Without state the node bootstraps
// InitialCluster, or joins an existing cluster through Join (returning
// once a member has added it), or else bootstraps a single-voter cluster of
// itself. observer, when not nil, is told about every catalog change, in
// index order, outside the FSM; Apply returns only once it has seen the
// write.
func Open(cfg Config, observer fsm.Observer) (*Node, error) {
	cfg = cfg.withDefaults()
	if err := cfg.Validate(); err != nil {
		if cfg.RaftListener != nil {
			cfg.RaftListener.Close()
		}
		return nil, err
	}
	n, err := openParts(cfg, observer)
	if err != nil {
		if cfg.RaftListener != nil {
			cfg.RaftListener.Close()
		}
		return nil, err
	}
	if err := n.start(); err != nil {
		n.Close()
		return nil, err
	}
	return n, nil
}

// openParts opens the stores and the transport and creates raft.
func openParts(cfg Config, observer fsm.Observer) (*Node, error) {
	if err := os.MkdirAll(cfg.DataDir, 0o700); err != nil {
		return nil, fmt.Errorf("create data dir: %w", err)
	}
	if err := claimDataDir(cfg.DataDir, cfg.NodeID); err != nil {
		return nil, err
	}
	n := &Node{cfg: cfg, log: cfg.Logger.With("component", "cluster", "node_id", cfg.NodeID),
		fsm: fsm.New(), unreachable: map[raft.ServerID]bool{}, leaderChanged: make(chan struct{}),
		provider: &dialProvider{overrides: cfg.PeerDial}, stop: make(chan struct{}), removed: make(chan struct{}),
		announce: make(chan struct{}, 1), metaTurn: make(chan struct{}, 1), metaKick: make(chan struct{}, 1), client: newPeerClient(cfg.Auth, cfg.ForwardTimeout, cfg.PeerScheme, cfg.PeerTLS),
		incarnation: cmp.Or(cfg.Incarnation, NewIncarnation())}
	n.replicaSync.Store(&cfg.ReplicaSyncAdvertise)
	n.raftLog = &raftLogState{}
	hl := newHCLog(cfg.Logger.With("component", "raft", "node_id", cfg.NodeID), n.raftLog)

	var err error
	n.store, err = raftboltdb.New(raftboltdb.Options{
		Path:        filepath.Join(cfg.DataDir, "raft.db"),
		BoltOptions: &bbolt.Options{Timeout: cfg.BoltOpenTimeout},
	})
	if errors.Is(err, bbolt.ErrTimeout) { // bolt's file lock: held by a live process, for BoltOpenTimeout
		return nil, fmt.Errorf("%w: another process holds %s (a kvselect node still running with --data-dir %s?): "+
			"stop it, or give this node its own --data-dir", ErrDataDirInUse, filepath.Join(cfg.DataDir, "raft.db"), cfg.DataDir)
	}
	if err != nil {
		return nil, fmt.Errorf("open raft store in %s: %w", cfg.DataDir, err)
	}
	snaps, err := raft.NewFileSnapshotStoreWithLogger(cfg.DataDir, cfg.SnapshotsRetained, hl)
	if err != nil {
		n.store.Close()
		return nil, fmt.Errorf("open snapshot store: %w", err)
	}
	if n.trans, n.stream, err = newTransport(cfg, n.provider, hl, n.log); err != nil {
		n.store.Close()
		return nil, err
	}
	cfg.RaftListener = nil // owned by the transport from here on

	rc := raft.DefaultConfig()
	rc.LocalID = raft.ServerID(cfg.NodeID)
	rc.HeartbeatTimeout = cfg.HeartbeatTimeout
	rc.ElectionTimeout = cfg.ElectionTimeout
	rc.LeaderLeaseTimeout = cfg.LeaderLeaseTimeout
	rc.CommitTimeout = cfg.CommitTimeout
	rc.SnapshotThreshold = cfg.SnapshotThreshold
	rc.SnapshotInterval = cfg.SnapshotInterval
	rc.TrailingLogs = cfg.TrailingLogs
	rc.Logger = hl
	if err := raft.ValidateConfig(rc); err != nil {
		n.closeStores()
		return nil, fmt.Errorf("raft config: %w", err)
	}
	if n.hadState, err = raft.HasExistingState(n.store, n.store, snaps); err != nil {
		n.closeStores()
		return nil, fmt.Errorf("inspect raft state: %w", err)
	}
	if !n.hadState && len(cfg.InitialCluster) > 0 {
		if err := n.checkInitialCluster(); err != nil {
			n.closeStores()
			return nil, err
		}
	}
	if conf, ok := n.bootstrapConfiguration(); ok {
		// Written to the stores before raft runs (hashicorp/raft's static
		// bootstrap), not through a running raft: the transport already
		// listens, and a peer of --initial-cluster that campaigned before
		// a live bootstrap was handled left a term behind, so the node
		// refused to bootstrap ("bootstrap only works on new clusters",
		// seen once under load).
		if err := raft.BootstrapCluster(rc, n.store, n.store, snaps, n.trans, conf); err != nil {
			n.closeStores()
			return nil, fmt.Errorf("bootstrap: %w", err)
		}
		n.bootstrapped = true
	}
	n.metrics = newMetrics(n)
	n.watcher = newWatcher(n.fsm, observer, n.log)
	n.health = newPeerHealth(n.log, cfg.HeartbeatTimeout)
	n.rpc = newRPCTransport(n.trans, n.health)
	n.raft, err = raft.NewRaft(rc, n.fsm, n.store, n.store, snaps, n.rpc)
	if err != nil {
		n.closeStores()
		return nil, fmt.Errorf("start raft: %w", err)
	}
	n.provider.raft.Store(n.raft)
	go n.watcher.run()
	n.observe()
	return n, nil
}

// bootstrapConfiguration is the configuration a node without raft state
// starts a cluster with: --initial-cluster, or itself alone when it joins
// none. A node that joins, or resumes, bootstraps nothing.
func (n *Node) bootstrapConfiguration() (raft.Configuration, bool) {
	cfg := n.cfg
	switch {
	case n.hadState || len(cfg.InitialCluster) == 0 && len(cfg.Join) > 0:
		return raft.Configuration{}, false
	case len(cfg.InitialCluster) > 0:
		conf := raft.Configuration{}
		for _, p := range cfg.InitialCluster {
			conf.Servers = append(conf.Servers, raft.Server{
				Suffrage: raft.Voter, ID: raft.ServerID(p.ID), Address: raft.ServerAddress(p.RaftAddr)})
		}
		return conf, true
	default:
		return raft.Configuration{Servers: []raft.Server{{
			Suffrage: raft.Voter, ID: raft.ServerID(cfg.NodeID), Address: n.trans.LocalAddr(),
		}}}, true
	}
}

// start joins as the data dir and configuration say (openParts wrote a
// bootstrap's configuration already), then
// starts publishing this node's metadata and watching for its removal.
func (n *Node) start() error {
	cfg := n.cfg
	switch {
	case n.hadState:
		if len(cfg.InitialCluster) > 0 || len(cfg.Join) > 0 {
			n.log.Info("data dir holds raft state: ignoring --initial-cluster and --join")
		}
		n.log.Info("resuming existing raft state", "raft_addr", n.RaftAddr())
	case len(cfg.InitialCluster) > 0:
		n.log.Info("bootstrapped new cluster", "members", len(cfg.InitialCluster), "raft_addr", n.RaftAddr())
	case len(cfg.Join) > 0:
		ctx, cancel := context.WithTimeout(context.Background(), cfg.JoinTimeout)
		defer cancel()
		if err := n.joinExisting(ctx); err != nil {
			return err
		}
	default:
		n.log.Info("bootstrapped new single-node cluster", "raft_addr", n.RaftAddr())
	}
	if cfg.HTTPAdvertise != "" {
		n.wg.Add(1)
		go n.publishMetadata()
	}
	n.wg.Add(3)
	go n.announceCommits()
	go n.expireLeases()
	go n.watchRemoval()
	return nil
}

// AnnounceCommit has the leader tell its followers the commit index now
// instead of with its next append. hashicorp/raft sends a follower the
// commit index only with an append, and with no new entries the next one
// comes up to twice CommitTimeout later (50 ms by default): a follower that
// forwarded a write and answers only once it has applied it (SPEC §3) would
// wait that long. A barrier is a log entry: replicating it carries the
// commit index at once. Requests are coalesced, and it returns at once; on
// a follower, or while a barrier is refused, it does nothing useful and no
// harm. index is the catalog index of the write being answered: one that an
// earlier announcement already covered (a write that changed nothing
// answers with the current index) costs no log entry.
func (n *Node) AnnounceCommit(index uint64) {
	if index <= n.announced.Load() {
		return
	}
	for cur := n.requested.Load(); index > cur; cur = n.requested.Load() {
		if n.requested.CompareAndSwap(cur, index) {
			break
		}
	}
	select {
	case n.announce <- struct{}{}:
	default: // one is pending: it will cover this write too
	}
}

// announceCommits runs the barriers AnnounceCommit asks for, one at a time.
func (n *Node) announceCommits() {
	defer n.wg.Done()
	for {
		select {
		case <-n.stop:
			return
		case <-n.announce:
		}
		if !n.IsLeader() {
			continue
		}
		// Every index asked for is of a committed write, so the barrier's
		// append carries a commit index at least this high. Barriers do
		// not count: a second request for the same write finds it
		// covered.
		upTo := n.requested.Load()
		if upTo <= n.announced.Load() {
			continue
		}
		f := n.raft.Barrier(n.cfg.ApplyTimeout)
		done := make(chan error, 1)
		go func() { done <- f.Error() }() // answered by raft at the latest when it shuts down
		select {
		case <-n.stop:
			return
		case err := <-done:
			if err != nil {
				n.log.Debug("commit announcement barrier failed", "err", err)
				continue
			}
			n.announced.Store(upTo) // one goroutine stores, in increasing order
		}
	}
}

// checkInitialCluster insists that the list names this node at the address
// it advertises: every node bootstraps the same configuration, and a node
// listed at another address would be unreachable under its own id.
func (n *Node) checkInitialCluster() error {
	for _, p := range n.cfg.InitialCluster {
		if p.ID != n.cfg.NodeID {
			continue
		}
		if p.RaftAddr != n.RaftAddr() {
			return fmt.Errorf("initial cluster lists %s at %s but it advertises %s (check --raft-advertise)",
				p.ID, p.RaftAddr, n.RaftAddr())
		}
		return nil
	}
	return fmt.Errorf("initial cluster does not list this node (%s)", n.cfg.NodeID)
}

// claimDataDir records the node id in the data dir on first use and refuses
// a data dir that belongs to another id: Raft state under the wrong id
// would make a second member out of one.
func claimDataDir(dir, id string) error {
	path := filepath.Join(dir, "node-id")
	raw, err := os.ReadFile(path)
	switch {
	case err == nil:
		if got := strings.TrimSpace(string(raw)); got != id {
			return fmt.Errorf("data dir %s belongs to node %q, not %q", dir, got, id)
		}
		return nil
	case errors.Is(err, os.ErrNotExist):
		if err := os.WriteFile(path, []byte(id+"\n"), 0o600); err != nil {
			return fmt.Errorf("record node id: %w", err)
		}
		return nil
	default:
		return fmt.Errorf("read node id: %w", err)
	}
}

func (n *Node) closeStores() {
	if n.trans != nil {
		n.trans.Close()
		n.stream.drain()
	}
	n.store.Close()
}

// observe follows leadership and heartbeat health without ever blocking
// raft: observations go through a buffered channel and are dropped when it
// is full (raft's non-blocking observer mode).
func (n *Node) observe() {
	n.obsCh = make(chan raft.Observation, 64)
	n.obsDone = make(chan struct{})
	n.observer = raft.NewObserver(n.obsCh, false, nil)
	n.raft.RegisterObserver(n.observer)
	go func() {
		defer close(n.obsDone)
		for o := range n.obsCh {
			switch d := o.Data.(type) {
			case raft.LeaderObservation:
				n.metrics.leaderChanges.Inc()
				n.log.Info("leader changed", "leader_id", d.LeaderID, "leader_addr", d.LeaderAddr)
				n.mu.Lock()
				close(n.leaderChanged)
				n.leaderChanged = make(chan struct{})
				n.mu.Unlock()
			case raft.FailedHeartbeatObservation:
				n.setReachable(d.PeerID, false)
			case raft.ResumedHeartbeatObservation:
				n.setReachable(d.PeerID, true)
			case raft.PeerObservation:
				if d.Removed {
					n.setReachable(d.Peer.ID, true)
					n.health.forget(d.Peer.ID)
				}
			}
		}
	}()
}

func (n *Node) setReachable(id raft.ServerID, ok bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if ok {
		delete(n.unreachable, id)
	} else {
		n.unreachable[id] = true
	}
}

// WaitForLeader blocks until a leader is known (this node or another).
func (n *Node) WaitForLeader(ctx context.Context) error {
	tick := time.NewTicker(pollEvery)
	defer tick.Stop()
	for {
		n.mu.Lock()
		ch := n.leaderChanged
		n.mu.Unlock()
		if addr, _ := n.knownLeader(); addr != "" {
			return nil
		}
		select {
		case <-ch:
		case <-tick.C: // in case a leader observation was dropped
		case <-ctx.Done():
			return fmt.Errorf("%w: %v", ErrNoLeader, ctx.Err())
		}
	}
}

// Bootstrapped reports whether this process started a new cluster: it
// had no Raft state and wrote the first configuration (alone, or as one
// of --initial-cluster). A node that joined, or resumed its data dir, did
// not. What a cluster starts with besides its members (--policy's seed of
// the cluster default) is written by the nodes that bootstrapped it.
func (n *Node) Bootstrapped() bool { return n.bootstrapped }

// ID returns the node id.
func (n *Node) ID() string { return n.cfg.NodeID }

// RaftAddr returns the address raft advertises.
func (n *Node) RaftAddr() string { return string(n.trans.LocalAddr()) }

// Catalog returns the local catalog (consistency=local).
func (n *Node) Catalog() *fsm.Catalog { return n.fsm.Catalog() }

// IsLeader reports whether this node leads.
func (n *Node) IsLeader() bool { return n.raft.State() == raft.Leader }

// Apply replicates one catalog command through the leader and returns the
// FSM's result. The error wraps ErrNotLeader or ErrNoLeader when nothing was
// written, ErrUnknownOutcome when the write may or may not have committed,
// and the FSM's deterministic error (such as fsm.ErrWorkerNotFound)
// otherwise. On success the local side effects of the write are done before
// Apply returns, so this node serves reads that see it.
func (n *Node) Apply(ctx context.Context, cmd fsm.Command) (*fsm.Result, error) {
	data, err := fsm.EncodeCommand(cmd)
	if err != nil {
		return nil, err
	}
	if err := n.leaderOnly(ctx); err != nil {
		return nil, err
	}
	start := time.Now()
	f := n.raft.Apply(data, n.cfg.ApplyTimeout)
	errCh := make(chan error, 1)
	go func() { errCh <- f.Error() }()
	select {
	case err = <-errCh:
	case <-ctx.Done():
		return nil, fmt.Errorf("%w: %v", ErrUnknownOutcome, ctx.Err())
	}
	if err != nil {
		switch {
		case errors.Is(err, raft.ErrNotLeader):
			return nil, n.notLeaderError()
		case errors.Is(err, raft.ErrEnqueueTimeout):
			return nil, fmt.Errorf("%w: raft apply queue full", ErrNoLeader)
		default: // leadership lost, shutdown: the entry may still commit
			return nil, fmt.Errorf("%w: %v", ErrUnknownOutcome, err)
		}
	}
	n.metrics.applyLatency.WithLabelValues(cmd.Type().String()).Observe(time.Since(start).Seconds())
	res, ok := f.Response().(*fsm.Result)
	if !ok {
		return nil, fmt.Errorf("%w: unexpected FSM response %T", ErrUnknownOutcome, f.Response())
	}
	if err := n.watcher.wait(ctx, res.Index, nil); err != nil {
		return res, fmt.Errorf("%w: committed at %d but local apply did not finish: %v", ErrUnknownOutcome, res.Index, err)
	}
	return res, res.Err
}

// leaderOnly succeeds on the leader. While no leader is known it waits up
// to LeaderWait for an election to finish.
func (n *Node) leaderOnly(ctx context.Context) error {
	if n.raft.State() == raft.Shutdown {
		return ErrClosed
	}
	if addr, _ := n.knownLeader(); addr == "" {
		wctx, cancel := context.WithTimeout(ctx, n.cfg.LeaderWait)
		err := n.WaitForLeader(wctx)
		cancel()
		if err != nil {
			return err
		}
	}
	if n.raft.State() != raft.Leader {
		return n.notLeaderError()
	}
	return nil
}

func (n *Node) notLeaderError() error {
	addr, id := n.knownLeader()
	if addr == "" {
		return ErrNoLeader
	}
	return fmt.Errorf("%w: leader is %s at %s", ErrNotLeader, id, addr)
}

// CatalogIndex is the catalog index this node has applied: the Raft index
// of the last catalog command whose side effects (index, load, listeners)
// are done here. It is catalog_index in /cluster/status.
func (n *Node) CatalogIndex() uint64 { return n.watcher.applied() }

// WaitApplied waits until this node's catalog reflects every Raft entry up
// to idx, with the local side effects done (read-your-writes for
// min_catalog_index), up to the context's deadline; then it fails with
// ErrCatalogBehind, naming this node's catalog_index as /cluster/status
// shows it.
//
// idx is usually a catalog index a write answered with. It may also be a
// Raft index that holds no catalog command, such as the applied_index of
// /cluster/status right after an election (the new leader's no-op entry):
// that index is reached once Raft has applied it and no catalog command
// lies between the catalog index and it (see catalogCovers).
func (n *Node) WaitApplied(ctx context.Context, idx uint64) error {
	if err := n.watcher.wait(ctx, idx, n.catalogCovers); err != nil {
		if errors.Is(err, ErrClosed) {
			return err
		}
		return fmt.Errorf("%w: %s has applied catalog_index %d, the request needs %d",
			ErrCatalogBehind, n.cfg.NodeID, n.watcher.applied(), idx)
	}
	return nil
}

// maxCoverScan bounds the log entries catalogCovers reads. Past it, the
// wait is for the catalog index alone.
const maxCoverScan = 64

// catalogCovers reports whether a catalog delivered at catalog index cat
// is also the catalog as of Raft index idx > cat: Raft has applied idx on
// this node, and the entries cat+1 … idx in the local log are no commands
// (no-ops, configuration changes, barriers), which leave the catalog as it
// was. Every command, even a rejected one, moves the catalog index, so a
// command among them means the delivered catalog is not there yet. A
// missing entry (compacted into a snapshot) proves nothing either way.
func (n *Node) catalogCovers(cat, idx uint64) bool {
	if idx-cat > maxCoverScan || n.raft.AppliedIndex() < idx {
		return false
	}
	for i := cat + 1; i <= idx; i++ {
		var l raft.Log
		if err := n.store.GetLog(i, &l); err != nil || l.Type == raft.LogCommand {
			return false
		}
	}
	return true
}

// LinearizableCatalog returns a catalog that reflects every write
// acknowledged before the call, using the leader read-index protocol: note
// the commit index, confirm leadership with a quorum (VerifyLeader) in the
// same term, and wait for the FSM to apply up to the commit index. The
// first read of a new term first waits on a barrier, because a fresh
// leader's commit index may not yet cover entries of earlier terms.
func (n *Node) LinearizableCatalog(ctx context.Context) (*fsm.Catalog, error) {
	if err := n.leaderOnly(ctx); err != nil {
		return nil, err
	}
	term := n.raft.CurrentTerm()
	if err := n.termBarrier(term); err != nil {
		return nil, err
	}
	commit := n.raft.CommitIndex()
	if err := n.raft.VerifyLeader().Error(); err != nil {
		return nil, n.readError(err)
	}
	if n.raft.CurrentTerm() != term {
		return nil, n.notLeaderError()
	}
	// AppliedIndex can run ahead of the FSM by the entries raft has handed
	// to it but not yet applied. That cannot hide an acknowledged write:
	// writes acknowledged by this leader waited for their FSM result, and
	// those of earlier terms are behind the barrier above. The catalog
	// index cannot be waited on instead: configuration entries and
	// barriers advance the commit index but never the catalog.
	for backoff := 50 * time.Microsecond; n.raft.AppliedIndex() < commit; backoff = min(2*backoff, 5*time.Millisecond) {
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("%w: applied %d, commit %d", ErrCatalogBehind, n.raft.AppliedIndex(), commit)
		case <-time.After(backoff):
		}
	}
	return n.fsm.Catalog(), nil
}

func (n *Node) readError(err error) error {
	if errors.Is(err, raft.ErrNotLeader) || errors.Is(err, raft.ErrLeadershipLost) {
		return n.notLeaderError()
	}
	if errors.Is(err, raft.ErrRaftShutdown) {
		return ErrClosed
	}
	return fmt.Errorf("%w: %v", ErrNoLeader, err)
}

// Close shuts the node down. A leader with other voters hands leadership
// over first, so the cluster does not wait out an election timeout.
func (n *Node) Close() error { return n.shutdown(true) }

// Crash shuts the node down the way a killed process stops: no leadership
// hand-over, so the others must detect the loss and elect. For tests.
func (n *Node) Crash() error { return n.shutdown(false) }

func (n *Node) shutdown(handOver bool) error {
	n.mu.Lock()
	if n.closed {
		n.mu.Unlock()
		return nil
	}
	n.closed = true
	n.mu.Unlock()
	close(n.stop)
	n.wg.Wait()
	if handOver && n.IsLeader() && n.otherVoters() > 0 {
		if err := n.transferLeadership(); err != nil {
			n.log.Warn("leadership transfer before shutdown failed", "err", err)
		}
	}
	f := n.raft.Shutdown()
	err := f.Error()
	n.raft.DeregisterObserver(n.observer)
	close(n.obsCh)
	<-n.obsDone
	n.watcher.close()
	if cerr := n.trans.Close(); cerr != nil && err == nil {
		err = cerr
	}
	n.stream.drain() // raft's connection handlers may still use the store
	if cerr := n.store.Close(); cerr != nil && err == nil {
		err = cerr
	}
	return err
}

func (n *Node) otherVoters() int {
	f := n.raft.GetConfiguration()
	if f.Error() != nil {
		return 0
	}
	count := 0
	for _, s := range f.Configuration().Servers {
		if s.Suffrage == raft.Voter && s.ID != raft.ServerID(n.cfg.NodeID) {
			count++
		}
	}
	return count
}
