package server

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"time"

	"github.com/kvselect/kvselect/cluster"
	httpd "github.com/kvselect/kvselect/http"
	"github.com/kvselect/kvselect/ingest"
	"github.com/kvselect/kvselect/scheduler"
	"github.com/kvselect/kvselect/zmqsync"
)

// Config is everything one node needs. Start fills the zero fields that
// have a default (withDefaults, and each part from its package's
// DefaultConfig), then refuses what Validate refuses before it binds or
// opens anything. Cluster and Scheduler have no zero defaults: start them
// from cluster.DefaultConfig and scheduler.DefaultConfig.
type Config struct {
	// HTTPAddr is the address the API listens on (bind:port); port 0 picks
	// a free port.
	HTTPAddr string
	// Cluster configures the Raft node. Its HTTPAdvertise defaults to the
	// listening address, with 127.0.0.1 for an unspecified bind address.
	Cluster cluster.Config
	// Scheduler holds the selection settings.
	Scheduler scheduler.Config
	// AuthToken is the admin token (SPEC §11): with one, routes need a
	// bearer token as their access class and AuthScope say
	// (http/access.go); the node sends it on its own calls to other nodes
	// and on the writes it forwards, and replica sync keys its MACs with
	// it. AuthTokenAlso is accepted as well, never sent (a token file's
	// second line, during a rotation). These are the tokens at start;
	// SetAuthToken and ReloadAuthToken change them while the node runs.
	AuthToken, AuthTokenAlso string
	// AuthTokenFile is the file they were read from (--auth-token-file),
	// which ReloadAuthToken reads again; "" when there is none.
	AuthTokenFile string
	// AuthScope is what the admin token protects: httpd.ScopeAll (also
	// for "") or httpd.ScopeAdmin.
	AuthScope httpd.Scope
	// SelectionToken (and SelectionTokenAlso, a second line) is accepted
	// besides the admin token on the routes a Ray caller needs (classes
	// selection and worker), and answered 403 on the others; it needs
	// AuthToken and must differ from it. SelectionTokenFile is its file
	// (--selection-token-file), read again with the admin token's.
	SelectionToken, SelectionTokenAlso string
	SelectionTokenFile                 string
	// TLS, when set, serves the API over HTTPS and makes the node call
	// the others over https (tls.go).
	TLS *TLSConfig
	// CatalogWait bounds waiting for min_catalog_index (default 2 s).
	CatalogWait time.Duration
	// Ingest tunes the KV event listeners (threads, backoff, replay).
	Ingest ingest.Config
	// Recovery tunes the startup recovery of the KV index from a peer's
	// dump (recovery.go).
	Recovery RecoveryConfig
	// ReplicaSync turns replica sync of active load on (SPEC §3.6), from
	// the start or, with Auto, once the node has a second member; nil
	// leaves it off.
	ReplicaSync *ReplicaSyncConfig
	// InitialThresholds are given to each model once (thresholds.go).
	InitialThresholds InitialThresholds
	Logger            *slog.Logger
}

// ReplicaSyncConfig configures replica sync.
type ReplicaSyncConfig struct {
	// Listen is the PUB endpoint to bind, tcp://bind:port (port 0 picks
	// one).
	Listen string
	// Advertise is the endpoint the other nodes dial; by default the host
	// of the HTTP advertise address with the bound port.
	Advertise string
	// Peers are followed from the start besides the cluster members
	// (--replica-sync-peers).
	Peers []string
	// AntiEntropyPeriod is how often the node publishes its live booking
	// set (0: zmqsync.DefaultAntiEntropyPeriod, 1 s).
	AntiEntropyPeriod time.Duration
	// Auto runs replica sync only while the node has, or has had, a
	// second member (SPEC §2, kvselect's default): from the start when
	// --initial-cluster lists more than one member or the node joins,
	// else from the first Raft configuration with a second member
	// (decideReplicaSync). Without it replica sync runs from the start.
	Auto bool
}

// ErrInvalidConfig is wrapped by every error Config.Validate returns about
// the server's own fields; the parts' errors wrap their packages' own
// ErrInvalidConfig (cluster, scheduler, ingest, zmqsync) or ErrTLSConfig.
var ErrInvalidConfig = errors.New("invalid node configuration")

// withDefaults fills the zero fields Start takes as defaults: the logger,
// and the recovery's timings (DefaultRecoveryConfig). The parts fill
// their own (ingest.New, zmqsync.Start, cluster.Open, each from its
// package's DefaultConfig); the scheduler's and the cluster's timings have
// no zero default and start from their DefaultConfig.
func (c Config) withDefaults() Config {
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	c.Recovery = c.Recovery.withDefaults()
	return c
}

// Validate checks everything Start would refuse before it binds or opens
// anything: the server's own fields and each part's Validate. It reports
// every problem at once, each naming its field (and flag).
func (c Config) Validate() error {
	var errs []error
	if c.HTTPAddr != "" {
		if err := checkListenAddr(c.HTTPAddr); err != nil {
			errs = append(errs, fmt.Errorf("%w: HTTPAddr (--bind, --port): %w", ErrInvalidConfig, err))
		}
	}
	if err := checkTokens(&c); err != nil {
		errs = append(errs, fmt.Errorf("%w: %w", ErrInvalidConfig, err))
	}
	if c.AuthScope != "" {
		if _, err := httpd.ParseScope(string(c.AuthScope)); err != nil {
			errs = append(errs, fmt.Errorf("%w: AuthScope (--auth-scope): %w", ErrInvalidConfig, err))
		}
	}
	if c.CatalogWait < 0 {
		errs = append(errs, fmt.Errorf("%w: CatalogWait must not be negative, got %s", ErrInvalidConfig, c.CatalogWait))
	}
	if c.TLS != nil {
		if err := c.TLS.Validate(); err != nil {
			errs = append(errs, err)
		} else if err := checkPeerSchemes(&c, "https"); err != nil {
			errs = append(errs, err)
		}
	}
	errs = append(errs, c.Cluster.Validate(), c.Scheduler.Validate(), c.Ingest.Validate(), c.Recovery.Validate())
	if c.ReplicaSync != nil {
		errs = append(errs, c.ReplicaSync.Validate())
	}
	return errors.Join(errs...)
}

// Validate checks the replica-sync endpoints: the one to bind, the one
// advertised (which names a port, so it needs one named in Listen) and
// the peers.
func (c ReplicaSyncConfig) Validate() error {
	var errs []error
	if err := zmqsync.ValidateListen(c.Listen); err != nil {
		errs = append(errs, fmt.Errorf("%w: ReplicaSync.Listen (--bind, --replica-sync-port): %w", ErrInvalidConfig, err))
	} else if c.Advertise != "" && listenPort(c.Listen) == "0" {
		errs = append(errs, fmt.Errorf("%w: ReplicaSync.Advertise (--replica-sync-advertise) needs a port in Listen (--replica-sync-port): the endpoint it advertises names the port, which the OS would choose otherwise", ErrInvalidConfig))
	}
	for _, ep := range append([]string{c.Advertise}, c.Peers...) {
		if ep == "" {
			continue
		}
		if err := zmqsync.ValidateEndpoint(ep); err != nil {
			errs = append(errs, fmt.Errorf("%w: ReplicaSync.Peers/Advertise (--replica-sync-peers, --replica-sync-advertise): %w", ErrInvalidConfig, err))
		}
	}
	if c.AntiEntropyPeriod < 0 {
		errs = append(errs, fmt.Errorf("%w: ReplicaSync.AntiEntropyPeriod must not be negative, got %s", ErrInvalidConfig, c.AntiEntropyPeriod))
	}
	return errors.Join(errs...)
}

// checkListenAddr accepts host:port with a numeric port from 0 (the OS
// chooses) to 65535; the host may be empty.
func checkListenAddr(addr string) error {
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return err
	}
	if n, err := strconv.Atoi(port); err != nil || n < 0 || n > 65535 {
		return fmt.Errorf("%q: the port must be from 0 to 65535", addr)
	}
	return nil
}

// listenPort is the port of a valid tcp://host:port endpoint.
func listenPort(ep string) string {
	_, port, _ := net.SplitHostPort(ep[len("tcp://"):])
	return port
}
