package cluster

import (
	"cmp"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"time"

	"github.com/kvselect/kvselect/internal/authtoken"
)

// Config configures one Raft node. Start from DefaultConfig.
type Config struct {
	// NodeID is the node's stable Raft server id.
	NodeID string
	// DataDir holds raft.db (log and stable store) and snapshots/.
	DataDir string
	// RaftBind is the TCP address the Raft transport listens on; port 0
	// picks a free port (tests).
	RaftBind string
	// RaftAdvertise is the address other nodes dial; empty means the bound
	// address. It must never be an unspecified address (0.0.0.0).
	RaftAdvertise string
	// RaftListener, when set, is a listener already bound for the Raft
	// transport; RaftBind is then ignored. Tests bind every node's port
	// first and build InitialCluster from them.
	RaftListener net.Listener
	// HTTPAdvertise is this node's HTTP address (host:port) as others
	// should use it. It is replicated as node metadata, so followers can
	// forward writes to the leader. Empty disables publishing metadata.
	HTTPAdvertise string
	// ReplicaSyncAdvertise is this node's replica-sync endpoint
	// (tcp://host:port), published with the metadata; empty when off.
	// Node.SetReplicaSyncAdvertise changes it once the node runs (replica
	// sync that starts when a second member joins).
	ReplicaSyncAdvertise string
	// Incarnation identifies this process in its node metadata; the
	// catalog turns its first write into the node's epoch. 0: Open draws
	// one. An owner that needs it before Open returns (its catalog
	// observer runs from the start) draws it with NewIncarnation.
	Incarnation uint64
	// NoCatalogRules makes the node, as far as the catalog rules go
	// (fsm/rules.go), a node of the release before them: its metadata
	// advertises none, and as leader it never switches them on. It exists
	// for tests of a rolling upgrade; a real node of that release also
	// stops at the switch's entry, which this one applies.
	NoCatalogRules bool

	// InitialCluster is the configuration every node of a new cluster
	// bootstraps with; it must list this node at RaftAdvertise. Ignored when
	// the data dir holds Raft state.
	InitialCluster []Peer
	// Join lists HTTP URLs of existing members. A node with no Raft state
	// asks them to add it as a voter and never bootstraps itself.
	Join []string
	// JoinTimeout bounds the join attempts at start-up.
	JoinTimeout time.Duration
	// PeerDial overrides the addresses this node dials to reach a peer
	// (fault-injection proxies). It never changes what is replicated.
	PeerDial map[string]PeerDial
	// Auth holds the token sent as a bearer token on the node's own calls
	// to other nodes (join, metadata), read at each call so that a
	// rotation applies to the next one; nil or empty: none. (Writes a
	// follower forwards go through the http package, which checks the
	// client's token first and forwards as the node, with this token.)
	Auth *authtoken.Holder
	// PeerScheme is the scheme of the node's own calls to other nodes'
	// HTTP addresses: "http" (the default) or "https" when the cluster
	// serves TLS; a Join URL given with a scheme keeps it. PeerTLS
	// configures those calls' TLS (nil: the system's roots).
	PeerScheme string
	PeerTLS    *tls.Config
	// ForwardTimeout bounds one inter-node HTTP request.
	ForwardTimeout time.Duration

	// Raft timing. The defaults suit three processes on one loaded machine.
	HeartbeatTimeout   time.Duration
	ElectionTimeout    time.Duration
	LeaderLeaseTimeout time.Duration
	CommitTimeout      time.Duration

	// SnapshotThreshold is how many log entries trigger a snapshot;
	// SnapshotInterval how often raft checks; TrailingLogs how many entries
	// stay after a snapshot for slow followers.
	SnapshotThreshold uint64
	SnapshotInterval  time.Duration
	TrailingLogs      uint64
	SnapshotsRetained int

	// Clock, when set, is the time lease deadlines are measured in
	// (tests move it by hand); nil means time.Now.
	Clock func() time.Time

	// ApplyTimeout bounds how long a write waits to be enqueued.
	ApplyTimeout time.Duration
	// LeaderWait is how long a write or linearizable read waits for a
	// leader to be elected before failing with ErrNoLeader, so that a
	// client does not see an election as an error.
	LeaderWait time.Duration
	// BoltOpenTimeout bounds waiting for the raft.db file lock (another
	// process holding the data dir).
	BoltOpenTimeout time.Duration

	Logger *slog.Logger
}

// DefaultConfig returns production defaults, the one source of every
// default of Config (the flags take theirs from here).
func DefaultConfig() Config {
	return Config{
		HeartbeatTimeout:   1000 * time.Millisecond,
		ElectionTimeout:    1000 * time.Millisecond,
		LeaderLeaseTimeout: 500 * time.Millisecond,
		CommitTimeout:      50 * time.Millisecond,
		SnapshotThreshold:  8192,
		SnapshotInterval:   30 * time.Second,
		TrailingLogs:       10240,
		SnapshotsRetained:  2,
		ApplyTimeout:       5 * time.Second,
		LeaderWait:         5 * time.Second,
		BoltOpenTimeout:    5 * time.Second,
		JoinTimeout:        60 * time.Second,
		ForwardTimeout:     10 * time.Second,
	}
}

// withDefaults fills the fields whose zero Open takes as a default
// (Logger, SnapshotsRetained) from DefaultConfig. The timings have no
// zero default: a zero there is refused by Validate, so a Config starts
// from DefaultConfig (or TestConfig).
func (c Config) withDefaults() Config {
	c.SnapshotsRetained = cmp.Or(c.SnapshotsRetained, DefaultConfig().SnapshotsRetained)
	c.Logger = cmp.Or(c.Logger, slog.Default())
	return c
}

// Validate checks the configuration. Every error wraps ErrInvalidConfig;
// Open reports them all at once.
func (c Config) Validate() error {
	var errs []error
	if c.NodeID == "" {
		errs = append(errs, errors.New("node id is required"))
	}
	if c.DataDir == "" {
		errs = append(errs, errors.New("data dir is required"))
	}
	if c.RaftListener == nil {
		if _, _, err := net.SplitHostPort(c.RaftBind); err != nil {
			errs = append(errs, fmt.Errorf("raft bind address %q: %w", c.RaftBind, err))
		}
	}
	if c.HTTPAdvertise != "" {
		if err := CheckAdvertise(c.HTTPAdvertise); err != nil {
			errs = append(errs, fmt.Errorf("http advertise address: %w", err))
		}
	}
	if len(c.InitialCluster) > 0 && len(c.Join) > 0 {
		errs = append(errs, errors.New("give --initial-cluster or --join, not both"))
	}
	if err := validatePeers(c.InitialCluster); err != nil {
		errs = append(errs, fmt.Errorf("initial cluster: %w", err))
	}
	if c.JoinTimeout <= 0 || c.ForwardTimeout <= 0 {
		errs = append(errs, errors.New("join and forward timeouts must be positive"))
	}
	if c.RaftAdvertise != "" {
		if err := CheckAdvertise(c.RaftAdvertise); err != nil {
			errs = append(errs, fmt.Errorf("raft advertise address: %w", err))
		}
	}
	if c.HeartbeatTimeout <= 0 || c.ElectionTimeout <= 0 || c.LeaderLeaseTimeout <= 0 || c.CommitTimeout <= 0 {
		errs = append(errs, errors.New("raft timeouts must be positive"))
	}
	if c.LeaderLeaseTimeout > c.HeartbeatTimeout {
		errs = append(errs, errors.New("leader lease timeout must not exceed the heartbeat timeout"))
	}
	if c.ApplyTimeout <= 0 || c.BoltOpenTimeout <= 0 {
		errs = append(errs, errors.New("apply and bolt open timeouts must be positive"))
	}
	if c.SnapshotInterval <= 0 {
		errs = append(errs, fmt.Errorf("SnapshotInterval (--raft-snapshot-interval) must be positive, got %v", c.SnapshotInterval))
	}
	if c.SnapshotsRetained < 0 {
		errs = append(errs, fmt.Errorf("SnapshotsRetained must be at least 1, got %d", c.SnapshotsRetained))
	}
	for i, err := range errs {
		errs[i] = fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	}
	return errors.Join(errs...)
}

// CheckAdvertise rejects addresses other nodes cannot dial: no host, an
// unspecified host (0.0.0.0, ::) or port 0.
func CheckAdvertise(addr string) error {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("%q: %w", addr, err)
	}
	if host == "" {
		return fmt.Errorf("%q has no host", addr)
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
		return fmt.Errorf("%q is an unspecified address; advertise one other nodes can reach", addr)
	}
	if port == "0" {
		return fmt.Errorf("%q has port 0", addr)
	}
	return nil
}

// Peer is one server of an initial cluster configuration.
type Peer struct {
	ID       string
	RaftAddr string
}

// ParsePeers parses --initial-cluster: "n1=host:port,n2=host:port,...".
func ParsePeers(s string) ([]Peer, error) {
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	var out []Peer
	for _, item := range strings.Split(s, ",") {
		id, addr, ok := strings.Cut(strings.TrimSpace(item), "=")
		if !ok || id == "" || addr == "" {
			return nil, fmt.Errorf("%q is not id=host:port", item)
		}
		out = append(out, Peer{ID: id, RaftAddr: addr})
	}
	return out, validatePeers(out)
}

func validatePeers(peers []Peer) error {
	ids, addrs := map[string]bool{}, map[string]bool{}
	for _, p := range peers {
		if p.ID == "" {
			return errors.New("a member has no id")
		}
		if err := CheckAdvertise(p.RaftAddr); err != nil {
			return fmt.Errorf("member %s: %w", p.ID, err)
		}
		if ids[p.ID] || addrs[p.RaftAddr] {
			return fmt.Errorf("member %s=%s is listed twice", p.ID, p.RaftAddr)
		}
		ids[p.ID], addrs[p.RaftAddr] = true, true
	}
	return nil
}

// PeerDial is where this node dials one peer's Raft, HTTP and replica-sync
// ports instead of the advertised ones; empty fields keep the advertised.
type PeerDial struct {
	Raft, HTTP, ReplicaSync string
}

// ParsePeerDial parses --peer-dial: "n2=raft/http/sync,n3=raft/http/sync",
// where trailing parts may be omitted.
func ParsePeerDial(s string) (map[string]PeerDial, error) {
	out := map[string]PeerDial{}
	if strings.TrimSpace(s) == "" {
		return out, nil
	}
	for _, item := range strings.Split(s, ",") {
		id, rest, ok := strings.Cut(strings.TrimSpace(item), "=")
		parts := strings.Split(rest, "/")
		if !ok || id == "" || len(parts) > 3 {
			return nil, fmt.Errorf("%q is not id=raft[/http[/replica-sync]]", item)
		}
		parts = append(parts, "", "")
		d := PeerDial{Raft: parts[0], HTTP: parts[1], ReplicaSync: parts[2]}
		for _, a := range []string{d.Raft, d.HTTP, d.ReplicaSync} {
			if a == "" {
				continue
			}
			if err := CheckAdvertise(a); err != nil {
				return nil, fmt.Errorf("peer %s: %w", id, err)
			}
		}
		out[id] = d
	}
	return out, nil
}
