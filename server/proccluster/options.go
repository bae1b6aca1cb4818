package proccluster

import (
	"strconv"
	"strings"
	"time"

	"github.com/kvselect/kvselect/server"
	"github.com/kvselect/kvselect/server/nodeflags"
)

// NodeOptions is a kvselect node's command line as fields. Args turns it
// into arguments, the one place a harness writes kvselect's flags; a zero
// field leaves the flag out (the node's default).
type NodeOptions struct {
	ID       string
	Bind     string // --bind
	HTTPPort int    // --port
	RaftAddr string // --raft-addr
	DataDir  string
	// InitialCluster are the members of a new cluster, "id=raft-addr".
	InitialCluster []string
	// Join are HTTP URLs of members to ask for a voter's place (--join).
	Join []string
	// ReplicaSyncPort names the replica-sync PUB's port (0: the OS
	// chooses, the node's default).
	ReplicaSyncPort int
	// PeerDial are "id=raft/http/sync" addresses to dial for a peer
	// instead of its own (fault proxies).
	PeerDial []string
	// KVDial are "host:port=host:port" addresses to dial instead of those
	// in workers' KV event and replay endpoints (fault proxies).
	KVDial []string
	// ElectionTimeout is the Raft heartbeat and election timeout; the
	// leader lease is half of it.
	ElectionTimeout   time.Duration
	SnapshotThreshold uint64
	SnapshotInterval  time.Duration
	// TrailingLogs is --raft-trailing-logs: the entries a leader keeps
	// after a snapshot.
	TrailingLogs        uint64
	ActiveRequestExpiry time.Duration
	AuthTokenFile       string
	AuthScope           string
	LogLevel            string
	// Extra are appended last: a flag given here overrides the fields'
	// (the last one wins).
	Extra []string
}

// Args is the node's command line.
func (o NodeOptions) Args() []string {
	var a []string
	add := func(flag, v string) {
		if v != "" {
			a = append(a, "--"+flag, v)
		}
	}
	num := func(n uint64) string {
		if n == 0 {
			return ""
		}
		return strconv.FormatUint(n, 10)
	}
	dur := func(d time.Duration) string {
		if d <= 0 {
			return ""
		}
		return d.String()
	}
	add("node-id", o.ID)
	add("bind", o.Bind)
	add("port", num(uint64(o.HTTPPort)))
	add("raft-addr", o.RaftAddr)
	add("data-dir", o.DataDir)
	add("initial-cluster", strings.Join(o.InitialCluster, ","))
	add("join", strings.Join(o.Join, ","))
	add("replica-sync-port", num(uint64(o.ReplicaSyncPort)))
	add("peer-dial", strings.Join(o.PeerDial, ","))
	add("kv-dial", strings.Join(o.KVDial, ","))
	add("raft-heartbeat-timeout", dur(o.ElectionTimeout))
	add("raft-election-timeout", dur(o.ElectionTimeout))
	add("raft-leader-lease-timeout", dur(o.ElectionTimeout/2))
	add("raft-snapshot-threshold", num(o.SnapshotThreshold))
	add("raft-snapshot-interval", dur(o.SnapshotInterval))
	add("raft-trailing-logs", num(o.TrailingLogs))
	if o.ActiveRequestExpiry > 0 {
		add("active-request-expiry-secs", strconv.FormatFloat(o.ActiveRequestExpiry.Seconds(), 'f', -1, 64))
	}
	add("auth-token-file", o.AuthTokenFile)
	add("auth-scope", o.AuthScope)
	add("log-level", o.LogLevel)
	return append(a, o.Extra...)
}

// Effective is the node Config kvselect makes of Args (Extra included,
// so a flag repeated there wins as it does in the node): what a harness
// reads a setting back from, rather than keep a copy that may drift.
func (o NodeOptions) Effective() (server.Config, error) { return nodeflags.Config(o.Args()) }

// CheckedArgs is Args checked against kvselect's own flag definitions
// (nodeflags.Check): a flag that does not exist, a value that does not
// parse or a combination the node refuses fails here, in kvselect's
// words, rather than as a process that exits at start.
func (o NodeOptions) CheckedArgs() ([]string, error) {
	args := o.Args()
	if err := nodeflags.Check(args); err != nil {
		return nil, err
	}
	return args, nil
}
