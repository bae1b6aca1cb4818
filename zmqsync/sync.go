package zmqsync

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/go-zeromq/zmq4"

	"github.com/kvselect/kvselect/api"
	"github.com/kvselect/kvselect/internal/backoff"
	"github.com/kvselect/kvselect/internal/zmqx"
	"github.com/kvselect/kvselect/scheduler/replica"
)

// The transport. Each node binds one PUB socket and keeps one SUB per peer
// endpoint, each with its own reconnect loop (zmq4's own is off, as for
// the KV event listeners). Publish hands an event to a bounded queue and
// never waits (a full queue drops and counts); one sender goroutine
// batches what is queued into a message and gives it to the PUB socket.
// zmq4's PUB writes each message to its subscribers one after another and
// queues at most zmqx.PubQueue messages, dropping past that without a
// word; so the guarded transport cuts off a subscriber that stops reading
// (zmqx.WriteTimeout) or keeps the writer waiting most of the time, and
// the queue drains. The residual loss, a burst of more than PubQueue
// messages faster than the slowest connected subscriber reads, is not
// counted by the sender; receivers see it as a gap in the origin's
// counters (kvselect_replica_sync_missed_messages_total), and
// anti-entropy heals what it lost (antientropy.go). A SUB checks each
// message's frames and, while the node has a token, its MAC (auth.go),
// decodes it whole, drops the node's own echoes and what its origin's
// state refuses (origin.go: cluster, membership, epoch, counter), and
// applies the events in order through Config.Apply.
//
// The sender numbers its v2 messages from 1 within its epoch; it sends
// nothing of its own between learning the cluster id and learning its
// epoch (its events wait in the queue), and sends v1 while the catalog
// has no cluster id yet (a cluster still on the previous release).

var (
	// ErrEndpoint: a peer endpoint that is not tcp://host:port.
	ErrEndpoint = errors.New("invalid replica-sync endpoint")
	// ErrPeerNotFound: deregistering an endpoint that is not registered.
	ErrPeerNotFound = errors.New("replica-sync peer not registered")
	// ErrMemberPeer: deregistering an endpoint the node follows only
	// because it is a cluster member's; it goes when the member does.
	ErrMemberPeer = errors.New("replica-sync peer is a cluster member")
	// ErrTooManyPeers: registering one more endpoint than
	// MaxRegisteredPeers.
	ErrTooManyPeers = errors.New("too many registered replica-sync peers")
	// ErrClosed: the syncer is closed.
	ErrClosed = errors.New("replica sync closed")
)

// A message carries at most maxBatch events, and stops taking more once
// they reach about maxBatchBytes: far below the 64 MiB frames a receiver
// accepts, and small enough that one message never holds a subscriber up.
const (
	maxBatch      = 256
	maxBatchBytes = 1 << 20
)

// encodedSize is about how many bytes ev takes on the wire (an upper
// bound: 9 bytes per hash, 3 of header per id, 5 per index, 64 for the
// numbers and headers).
func encodedSize(ev *replica.Event) int {
	n := 64 + len(ev.ReservationID) + len(ev.Model) + len(ev.Tenant) + 9*len(ev.SequenceHashes)
	switch {
	case ev.Live != nil:
		n += len(ev.Live.After) + len(ev.Live.Through) + idsSize(ev.Live.IDs) + 5*len(ev.Live.Prefilling)
	case ev.Want != nil:
		n += len(ev.Want.Target) + idsSize(ev.Want.IDs)
	}
	return n
}

func idsSize(ids []string) int {
	n := 0
	for _, id := range ids {
		n += 3 + len(id)
	}
	return n
}

// Source is why the node follows a peer.
type Source string

// Sources of a peer; one endpoint may have several.
const (
	SourceFlag       Source = api.PeerSourceFlag       // --replica-sync-peers
	SourceRegistered Source = api.PeerSourceRegistered // POST /replica_sync/register_peer
	SourceMember     Source = api.PeerSourceMember     // a cluster member's metadata
)

// Member is a cluster member as replica sync needs it: the endpoint it
// advertises (empty when it runs without replica sync), the address to
// dial it at (the same unless --peer-dial says otherwise) and its epoch in
// the catalog.
type Member struct {
	Endpoint string
	Dial     string
	Epoch    uint64
}

// Identity is this node's place in its cluster, from the catalog: the
// cluster id (zero until the catalog has one) and this process's epoch (0
// until the catalog records it).
type Identity struct {
	ClusterID ClusterID
	Epoch     uint64
}

// Syncer publishes this node's lifecycle events and applies its peers'.
type Syncer struct {
	cfg     Config
	log     *slog.Logger
	metrics *metrics
	pub     zmq4.Socket
	addr    string // tcp://host:port actually bound
	out     chan replica.Event

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu      sync.Mutex
	closed  bool
	peers   map[string]*peer // by endpoint
	members map[string]Member
	// departures numbers the linger of each departed member's endpoint
	// (departed.go), departGen the last number given.
	departures map[string]uint64
	departGen  uint64

	// identity is SetIdentity's; identityChanged is closed and replaced
	// when it changes (the sender waits on it while it holds).
	identity        atomic.Pointer[Identity]
	identityMu      sync.Mutex
	identityChanged chan struct{}

	// Origins (origin.go): omu guards the map and known (the catalog's
	// members as last given); each state has its own lock.
	omu     sync.Mutex
	origins map[string]*originState
	known   map[string]Member
	// dual: send v1 copies too (recomputeDual).
	dual atomic.Bool

	// sent is the epoch and counter of the last v2 message whose events
	// the sender took off the queue (antientropy.go reads it).
	sentMu             sync.Mutex
	sentEpoch, sentCtr uint64

	// sendFilter, when set, is asked about every message before it is
	// sent: false drops it (SetSendFilter, for fault injection).
	sendFilter atomic.Pointer[func(*Message) bool]
}

// Start binds the PUB socket, subscribes to cfg.Peers and starts the
// sender.
func Start(cfg Config) (*Syncer, error) {
	cfg = cfg.withDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &Syncer{
		cfg: cfg, log: cfg.Logger.With("component", "zmqsync"), metrics: newMetrics(cfg.DropReasons),
		out: make(chan replica.Event, cfg.SendQueue), ctx: ctx, cancel: cancel,
		peers: map[string]*peer{}, members: map[string]Member{},
		identityChanged: make(chan struct{}), origins: map[string]*originState{}, known: map[string]Member{},
	}
	s.identity.Store(&Identity{})
	pub, err := zmqx.ListenPub(ctx, cfg.Listen, s.log)
	if err != nil {
		cancel()
		return nil, fmt.Errorf("replica sync: bind %s: %w", cfg.Listen, err)
	}
	s.pub = pub
	s.addr = "tcp://" + pub.Addr().String()
	if cfg.Advertise == "" && cfg.AdvertiseHost != "" {
		_, port, _ := net.SplitHostPort(pub.Addr().String())
		s.cfg.Advertise = "tcp://" + net.JoinHostPort(cfg.AdvertiseHost, port)
	}
	s.wg.Add(1)
	go s.send()
	if cfg.Live != nil {
		s.wg.Add(1)
		go s.announce()
	}
	s.mu.Lock()
	for _, ep := range cfg.Peers {
		s.addSourceLocked(ep, ep, SourceFlag, "")
	}
	s.mu.Unlock()
	s.log.Debug("replica sync started", "listen", s.addr, "peers", cfg.Peers) // the server says what runs and why
	return s, nil
}

// Endpoint is the address the PUB socket is bound to (tcp://host:port).
func (s *Syncer) Endpoint() string { return s.addr }

// Advertised is the endpoint the other nodes should subscribe to.
func (s *Syncer) Advertised() string {
	if s.cfg.Advertise != "" {
		return s.cfg.Advertise
	}
	return s.addr
}

// Publish queues one of this node's events for the peers. It never blocks:
// when the queue is full the event is dropped and counted.
//
// While the sender holds (the catalog has a cluster id but not this
// process's epoch: a restart that cannot commit yet, in a minority, say),
// an admission is not queued: held for as long as that lasts, the queue
// would keep the sequence hashes of bookings long ended, outside the
// node's booking bounds (a review found it). The peers ask for the live
// ones once the node publishes its first live set (anti-entropy); ends and
// live sets, small, wait in the queue.
func (s *Syncer) Publish(ev replica.Event) {
	if ev.Kind == replica.KindAdmission {
		if id := s.identity.Load(); !id.ClusterID.IsZero() && id.Epoch == 0 {
			s.metrics.heldAdmissions.Inc()
			return
		}
	}
	select {
	case s.out <- ev:
	default:
		s.metrics.sendDropped.Inc()
	}
}

// SetIdentity tells the syncer the cluster id and this process's epoch, as
// the catalog has them now (every catalog change); see Identity.
func (s *Syncer) SetIdentity(id Identity) {
	s.identityMu.Lock()
	defer s.identityMu.Unlock()
	if cur := s.identity.Load(); *cur == id {
		return
	}
	if cur := s.identity.Load(); cur.Epoch == 0 && id.Epoch != 0 {
		s.log.Info("replica sync: this node's epoch is in the catalog; publishing", "epoch", id.Epoch, "cluster_id", id.ClusterID)
	}
	s.identity.Store(&id)
	close(s.identityChanged)
	s.identityChanged = make(chan struct{})
}

// currentIdentity returns the identity and a channel closed when it next
// changes.
func (s *Syncer) currentIdentity() (Identity, <-chan struct{}) {
	s.identityMu.Lock()
	defer s.identityMu.Unlock()
	return *s.identity.Load(), s.identityChanged
}

// SetSendFilter makes the sender ask f about every message it is about to
// send (v2 messages with their counter already taken): false drops the
// message, as a lossy network would. For fault-injection tests; nil
// removes the filter.
func (s *Syncer) SetSendFilter(f func(*Message) bool) {
	if f == nil {
		s.sendFilter.Store(nil)
		return
	}
	s.sendFilter.Store(&f)
}

// send batches queued events into messages until the syncer closes.
func (s *Syncer) send() {
	defer s.wg.Done()
	msg := Message{Origin: s.cfg.NodeID, Events: make([]replica.Event, 0, maxBatch)}
	prev := Message{Version: PreviousVersion, Origin: s.cfg.NodeID}
	var (
		buf            []byte
		mac            macer
		epoch, counter uint64
	)
	for {
		id, changed := s.currentIdentity()
		if !id.ClusterID.IsZero() && id.Epoch == 0 {
			// The catalog has a cluster id but not this process's epoch
			// yet: hold (the events wait in the queue).
			select {
			case <-s.ctx.Done():
				return
			case <-changed:
			}
			continue
		}
		select {
		case <-s.ctx.Done():
			return
		case <-changed:
			continue
		case ev := <-s.out:
			msg.Events = append(msg.Events[:0], ev)
		}
		size := encodedSize(&msg.Events[0])
	drain:
		for len(msg.Events) < maxBatch && size < maxBatchBytes {
			select {
			case ev := <-s.out:
				msg.Events = append(msg.Events, ev)
				size += encodedSize(&ev)
			default:
				break drain
			}
		}
		if id.ClusterID.IsZero() {
			// A cluster without an id runs (partly) on the previous
			// release: v1, which has no live or want events.
			prev.Events = keepV1(prev.Events[:0], msg.Events)
			buf = s.transmit(&prev, buf, &mac)
			clear(msg.Events) // drop references to hash slices
			clear(prev.Events)
			continue
		}
		if id.Epoch != epoch {
			epoch, counter = id.Epoch, 0
		}
		counter++
		msg.Version, msg.ClusterID, msg.Epoch, msg.Counter = Version, id.ClusterID, epoch, counter
		msg.Events = slices.DeleteFunc(msg.Events, func(ev replica.Event) bool {
			return ev.Kind == replica.KindLive && ev.Epoch != epoch // a set taken in another epoch (antientropy.go)
		})
		s.sentMu.Lock()
		s.sentEpoch, s.sentCtr = epoch, counter
		s.sentMu.Unlock()
		buf = s.transmit(&msg, buf, &mac)
		if s.dual.Load() {
			// Members that may still run the previous release read v1
			// only; those of this release drop the copy (old_version).
			if prev.Events = keepV1(prev.Events[:0], msg.Events); len(prev.Events) > 0 {
				buf = s.transmit(&prev, buf, &mac)
				s.metrics.previousVersion.WithLabelValues("sent").Inc()
			}
		}
		clear(msg.Events) // drop references to hash slices
		clear(prev.Events)
	}
}

// keepV1 appends to dst the events of src that v1 can carry.
func keepV1(dst, src []replica.Event) []replica.Event {
	for _, ev := range src {
		if ev.Kind <= replica.KindFree {
			dst = append(dst, ev)
		}
	}
	return dst
}

// transmit encodes m into buf, adds the MAC while the node has a token,
// and hands it to the PUB socket; it returns buf for reuse.
func (s *Syncer) transmit(m *Message, buf []byte, mac *macer) []byte {
	buf = AppendMessage(buf[:0], m)
	if f := s.sendFilter.Load(); f != nil && !(*f)(m) {
		s.metrics.sendDropped.Add(float64(len(m.Events)))
		return buf
	}
	// zmq4 keeps the frames until its writer has sent them: give it its
	// own copy, buf is reused.
	var out zmq4.Msg
	if token := s.cfg.Auth.Token(); token != "" {
		// One allocation holds the payload and its MAC frame.
		framed := mac.sum(append(make([]byte, 0, len(buf)+MACSize), buf...), token, buf)
		out = zmq4.NewMsgFrom([]byte(Topic), framed[:len(buf)], framed[len(buf):])
	} else {
		out = zmq4.NewMsgFrom([]byte(Topic), slices.Clone(buf))
	}
	if err := s.pub.Send(out); err != nil {
		s.metrics.sendDropped.Add(float64(len(m.Events)))
		s.log.Debug("replica sync send failed", "err", err)
		return buf
	}
	s.metrics.sentMessages.Inc()
	s.metrics.sentEvents.Add(float64(len(m.Events)))
	return buf
}

// ValidateEndpoint checks a peer endpoint: tcp://host:port.
func ValidateEndpoint(ep string) error {
	u, err := url.Parse(ep)
	if err != nil || u.Scheme != "tcp" || u.Host == "" || u.Path != "" || u.RawQuery != "" || u.User != nil {
		return fmt.Errorf("%w: %q is not tcp://host:port", ErrEndpoint, ep)
	}
	host, port, err := net.SplitHostPort(u.Host)
	if err != nil || host == "" || port == "" || port == "0" {
		return fmt.Errorf("%w: %q is not tcp://host:port", ErrEndpoint, ep)
	}
	return nil
}

// Register follows an endpoint (POST /replica_sync/register_peer); it
// reports whether it was new. Registered peers live in memory only.
func (s *Syncer) Register(endpoint string) (created bool, err error) {
	if err := ValidateEndpoint(endpoint); err != nil {
		return false, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false, ErrClosed
	}
	if p := s.peers[endpoint]; (p == nil || !p.sources[SourceRegistered]) && s.registeredLocked() >= MaxRegisteredPeers {
		// Each is a subscription with its goroutine, socket and queue:
		// whoever may register may not grow the node without bound.
		return false, fmt.Errorf("%w: %d already; deregister one first", ErrTooManyPeers, MaxRegisteredPeers)
	}
	if p := s.peers[endpoint]; p != nil {
		// Already followed (by flag, registration or membership): 200.
		// A member's endpoint registered too stays after the member goes.
		p.sources[SourceRegistered] = true
		return false, nil
	}
	s.addSourceLocked(endpoint, endpoint, SourceRegistered, "")
	return true, nil
}

// MaxRegisteredPeers bounds the endpoints registered by hand (SPEC §11).
const MaxRegisteredPeers = 64

// registeredLocked counts the endpoints registered by hand; s.mu is held.
func (s *Syncer) registeredLocked() int {
	n := 0
	for _, p := range s.peers {
		if p.sources[SourceRegistered] {
			n++
		}
	}
	return n
}

// Deregister stops following an endpoint that was registered or given by
// flag. An endpoint that is also a member's stays followed as such.
func (s *Syncer) Deregister(endpoint string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.peers[endpoint]
	switch {
	case p == nil:
		return fmt.Errorf("%w: %s", ErrPeerNotFound, endpoint)
	case !p.sources[SourceRegistered] && !p.sources[SourceFlag]:
		return fmt.Errorf("%w: %s is node %s's; remove the node from the cluster instead", ErrMemberPeer, endpoint, p.nodeID)
	}
	s.dropSourceLocked(endpoint, SourceRegistered)
	s.dropSourceLocked(endpoint, SourceFlag)
	return nil
}

// SetMembers gives the node the catalog's members (by node id, every
// member, with its epoch; this node itself is skipped). It follows those
// with an endpoint: a member that joins is subscribed, one that leaves or
// moves is dropped. And it accepts messages from members only, from each
// one's current epoch on (origin.go): the mirrors of an earlier epoch are
// forgotten when the catalog shows a later one, and all of a member's when
// it leaves.
func (s *Syncer) SetMembers(members map[string]Member) {
	want := make(map[string]Member, len(members))
	for id, m := range members {
		if m.Dial == "" {
			m.Dial = m.Endpoint // compared with what is followed, as followed
		}
		want[id] = m
	}
	if !s.followMembers(want) {
		return
	}
	s.updateOrigins(want)
}

// followMembers subscribes to the members with an endpoint; it reports
// false when the syncer is closed.
func (s *Syncer) followMembers(members map[string]Member) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false
	}
	follows := func(a, b Member) bool { return a.Endpoint == b.Endpoint && a.Dial == b.Dial }
	for id, m := range s.members {
		nm, ok := members[id]
		if !ok {
			s.departLocked(id, m) // before the member source goes: one subscription throughout
		}
		if !ok || !follows(nm, m) {
			s.dropSourceLocked(m.Endpoint, SourceMember)
			delete(s.members, id)
		}
	}
	for id, m := range members {
		if id == s.cfg.NodeID || m.Endpoint == "" {
			continue
		}
		if _, ok := s.members[id]; ok {
			continue
		}
		if err := ValidateEndpoint(m.Endpoint); err != nil {
			s.log.Warn("cluster member has an invalid replica-sync endpoint; not followed", "node_id", id, "err", err)
			continue
		}
		s.members[id] = m
		s.addSourceLocked(m.Endpoint, m.Dial, SourceMember, id)
	}
	return true
}

// addSourceLocked follows endpoint (dialed at dial) for one more reason.
func (s *Syncer) addSourceLocked(endpoint, dial string, src Source, nodeID string) {
	p := s.peers[endpoint]
	if p != nil && src == SourceMember && p.dial != dial {
		// The member's dial address differs from how the endpoint was
		// reached before (--peer-dial): the member's wins.
		s.stopPeerLocked(p)
		p = nil
	}
	if p == nil {
		p = &peer{s: s, endpoint: endpoint, dial: dial, sources: map[Source]bool{}}
		p.status.State = StateConnecting
		s.peers[endpoint] = p
		ctx, cancel := context.WithCancel(s.ctx)
		p.cancel = cancel
		s.wg.Add(1)
		go p.run(ctx)
		s.log.Info("replica sync peer followed", "endpoint", endpoint, "dial", dial, "source", src, "node_id", nodeID)
	}
	p.sources[src] = true
	if nodeID != "" {
		p.nodeID = nodeID
	}
	s.metrics.peers.Set(float64(len(s.peers)))
}

// dropSourceLocked removes one reason to follow endpoint, and the
// subscription with the last one.
func (s *Syncer) dropSourceLocked(endpoint string, src Source) {
	p := s.peers[endpoint]
	if p == nil || !p.sources[src] {
		return
	}
	delete(p.sources, src)
	if len(p.sources) == 0 {
		s.stopPeerLocked(p)
		s.log.Info("replica sync peer dropped", "endpoint", endpoint)
	}
	s.metrics.peers.Set(float64(len(s.peers)))
}

func (s *Syncer) stopPeerLocked(p *peer) {
	delete(s.peers, p.endpoint)
	p.cancel()
	// Not waited for here (it may be applying an event); Close waits for
	// every peer goroutine.
}

// Peers returns the followed peers sorted by endpoint.
func (s *Syncer) Peers() []PeerStatus {
	s.mu.Lock()
	ps := make([]*peer, 0, len(s.peers))
	for _, p := range s.peers {
		ps = append(ps, p)
	}
	s.mu.Unlock()
	out := make([]PeerStatus, 0, len(ps))
	for _, p := range ps {
		out = append(out, p.snapshot())
	}
	slices.SortFunc(out, func(a, b PeerStatus) int { return strings.Compare(a.Endpoint, b.Endpoint) })
	return out
}

// Close stops the sender and every subscription, and closes the PUB socket.
func (s *Syncer) Close() {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return
	}
	s.closed = true
	s.mu.Unlock()
	s.cancel()
	s.wg.Wait()
	s.pub.Close()
}

// State of a peer subscription.
type State string

// Peer subscription states, as for KV event listeners.
const (
	StateConnecting State = api.ListenerConnecting
	StateActive     State = api.ListenerActive
	StateFailed     State = api.ListenerFailed
)

// PeerStatus describes one followed peer.
type PeerStatus struct {
	Endpoint string
	Dial     string
	NodeID   string // set for a cluster member
	Sources  []Source
	State    State
	// LastError is why the last connection failed.
	LastError string
	// Messages and Events count what arrived from the peer; Dropped the
	// events not applied (undecodable messages count all their bytes'
	// events as unknown, so they count once here as a message).
	Messages, Events, Dropped uint64
}

// peer is one SUB subscription with its reconnect loop.
type peer struct {
	s        *Syncer
	endpoint string
	dial     string
	cancel   context.CancelFunc

	// guarded by s.mu
	sources map[Source]bool
	nodeID  string

	// owned by the peer's goroutine
	opener   opener
	refusing bool // warned of unauthenticated messages; reset by a valid one

	mu     sync.Mutex
	status PeerStatus
}

func (p *peer) snapshot() PeerStatus {
	p.s.mu.Lock()
	srcs := make([]Source, 0, len(p.sources))
	for src := range p.sources {
		srcs = append(srcs, src)
	}
	nodeID := p.nodeID
	p.s.mu.Unlock()
	slices.Sort(srcs)
	p.mu.Lock()
	defer p.mu.Unlock()
	st := p.status
	st.Endpoint, st.Dial, st.NodeID, st.Sources = p.endpoint, p.dial, nodeID, srcs
	return st
}

func (p *peer) update(f func(*PeerStatus)) {
	p.mu.Lock()
	f(&p.status)
	p.mu.Unlock()
}

// run connects to the peer and applies its messages until ctx ends,
// reconnecting with exponential backoff and jitter.
func (p *peer) run(ctx context.Context) {
	defer p.s.wg.Done()
	backoff.Loop{
		Min: p.s.cfg.BackoffMin, Max: p.s.cfg.BackoffMax,
		Session:    p.session,
		Connecting: func() { p.update(func(st *PeerStatus) { st.State = StateConnecting }) },
		Failed:     func(err error) { p.update(func(st *PeerStatus) { st.State, st.LastError = StateFailed, err.Error() }) },
		Log:        p.s.log,
		Msg:        "replica sync peer connection failed; reconnecting",
		Attrs:      []any{"endpoint", p.endpoint},
	}.Run(ctx)
}

// session runs one connection: it reports whether any message arrived and
// why the connection ended.
func (p *peer) session(ctx context.Context) (received bool, err error) {
	sub, err := zmqx.Dial(ctx, zmq4.NewSub, p.dial, p.s.log, func(s zmq4.Socket) error {
		return s.SetOption(zmq4.OptionSubscribe, Topic)
	})
	if err != nil {
		return false, err
	}
	defer sub.Close() // the socket also ends with ctx, which unblocks Recv
	p.update(func(st *PeerStatus) { st.State, st.LastError = StateActive, "" })
	var m Message
	for {
		msg, err := sub.Recv()
		if err != nil {
			if ctx.Err() != nil {
				return received, ctx.Err()
			}
			return received, err
		}
		received = true
		p.receive(msg.Frames, &m)
	}
}

// receive decodes, checks and applies one message.
func (p *peer) receive(frames [][]byte, m *Message) {
	met := p.s.metrics
	met.receivedMessages.Inc()
	p.update(func(st *PeerStatus) { st.Messages++ })
	reason, err := p.opener.open(frames, p.s.cfg.Auth.Load(), p.s.cfg.PreviousTokenGrace, m)
	switch {
	case reason == "unauthenticated" && !p.refusing:
		// Once, until the peer's messages authenticate again, not per
		// message: a stranger, or a peer with another token (a rotation
		// not done on every node yet).
		p.s.log.Warn("replica sync peer sends messages this node cannot authenticate; dropping them",
			"endpoint", p.endpoint, "err", err)
		p.refusing = true
	case reason == "":
		p.refusing = false
	}
	var dropped uint64
	if reason == "" {
		reason = p.s.accept(m, func(st *originState) { dropped = p.s.applyEvents(st, m) })
	}
	if reason != "" {
		met.droppedMessages.WithLabelValues(reason).Inc()
		if reason != dropEcho {
			p.s.log.Debug("replica sync message dropped", "endpoint", p.endpoint, "origin", m.Origin, "reason", reason,
				"epoch", m.Epoch, "counter", m.Counter, "err", err)
		}
		return
	}
	p.update(func(st *PeerStatus) { st.Events += uint64(len(m.Events)); st.Dropped += dropped })
}

// applyEvents hands an accepted message's events to Apply, in order, with
// the origin's state st locked; it returns how many Apply dropped.
func (s *Syncer) applyEvents(st *originState, m *Message) (dropped uint64) {
	met := s.metrics
	self := s.identity.Load()
	for i := range m.Events {
		ev := &m.Events[i]
		met.receivedEvents.WithLabelValues(ev.Kind.String()).Inc()
		if st.departed.Load() && !departedApplies(m.Origin, ev) {
			met.droppedEvents.WithLabelValues(departedMember).Inc()
			dropped++
			continue
		}
		switch ev.Kind {
		case replica.KindWant:
			if ev.Want.Target != s.cfg.NodeID || ev.Want.Epoch != self.Epoch {
				continue // for another node, or an earlier start of this one
			}
		case replica.KindLive:
			st.assembleLive(ev.Live)
			if ev.Live.Complete {
				met.liveSets.WithLabelValues("received").Inc()
			}
		}
		if why := s.cfg.Apply(m.Origin, ev); why != "" {
			met.droppedEvents.WithLabelValues(why).Inc()
			dropped++
		}
	}
	return dropped
}
