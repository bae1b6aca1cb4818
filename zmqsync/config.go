package zmqsync

import (
	"cmp"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"strconv"
	"time"

	"github.com/kvselect/kvselect/internal/authtoken"
	"github.com/kvselect/kvselect/internal/backoff"
	"github.com/kvselect/kvselect/scheduler/replica"
)

// Config configures a Syncer.
type Config struct {
	// NodeID goes out as every message's origin; messages with it coming
	// back are this node's own echoes and are dropped.
	NodeID string
	// Listen is the PUB endpoint to bind, tcp://host:port (port 0 picks
	// one; Syncer.Endpoint tells which).
	Listen string
	// Advertise is the endpoint the other nodes dial. When empty it is
	// tcp://AdvertiseHost:<bound port>, or the bound endpoint itself.
	Advertise     string
	AdvertiseHost string
	// Peers are endpoints to subscribe to from the start
	// (--replica-sync-peers).
	Peers []string
	// Apply applies one peer event and returns "" or why it dropped it
	// (a label of the drop counter). It is called from the peers'
	// goroutines, one event at a time per peer, with the origin's state
	// locked (origin.go). ev.Epoch and ev.Counter say which start of the
	// origin published it, in which message; a live part's Complete
	// says it ends a set whose every part arrived. Wants reach Apply only
	// when addressed to this node's current epoch.
	Apply func(origin string, ev *replica.Event) string
	// Forget drops what this node mirrors of origin from epochs before
	// the given one (every mirror of it for replica.ForgetAll: the member left).
	// It is called with the origin's state locked, so no event of a
	// forgotten epoch applies after it. nil: nothing is mirrored.
	Forget func(origin string, before uint64)
	// Live appends this node's live local bookings to dst; it is called
	// every AntiEntropyPeriod, and what it returns is published as the
	// node's live set (antientropy.go). nil: no live sets are published.
	Live func(dst []replica.LiveBooking) []replica.LiveBooking
	// AntiEntropyPeriod is how often the live set is published (default
	// DefaultAntiEntropyPeriod).
	AntiEntropyPeriod time.Duration
	// DepartedLinger is how long a member that left the cluster is still
	// followed, for the ends of other nodes' bookings it answers before it
	// finds out (departed.go; default DefaultDepartedLinger, negative:
	// not at all).
	DepartedLinger time.Duration
	// DropReasons are the reasons Apply may return, so the counters exist
	// from the start.
	DropReasons []string
	// Auth holds the shared token (--auth-token-file), read for every
	// message. While it holds one, every message sent carries a MAC frame
	// keyed by it, and a message received without a valid one is dropped
	// and counted (reason "unauthenticated"), so that only holders of the
	// token can change this node's load (doc.go, Authentication). nil or
	// empty: messages go without a MAC and every peer's are accepted.
	Auth *authtoken.Holder
	// PreviousTokenGrace is how long after a rotation of Auth's token
	// messages authenticated with the previous token are still accepted
	// (default DefaultPreviousTokenGrace; negative: not at all).
	PreviousTokenGrace time.Duration
	// SendQueue bounds the events waiting for the sender (default 65536);
	// past it Publish drops and counts.
	SendQueue int
	// BackoffMin and BackoffMax bound the reconnect delay to a peer
	// (defaults 100 ms and 5 s).
	BackoffMin, BackoffMax time.Duration
	Logger                 *slog.Logger
}

// DefaultConfig returns every default of Config: a zero field of the
// Config given to Start takes its value from here.
func DefaultConfig() Config {
	return Config{
		AntiEntropyPeriod:  DefaultAntiEntropyPeriod,
		DepartedLinger:     DefaultDepartedLinger,
		PreviousTokenGrace: DefaultPreviousTokenGrace,
		SendQueue:          1 << 16,
		BackoffMin:         backoff.DefaultMin,
		BackoffMax:         backoff.DefaultMax,
		Logger:             slog.Default(),
	}
}

// withDefaults fills c's zero fields from DefaultConfig, and the backoff
// bounds by backoff.Bounds.
func (c Config) withDefaults() Config {
	d := DefaultConfig()
	c.AntiEntropyPeriod = cmp.Or(c.AntiEntropyPeriod, d.AntiEntropyPeriod)
	c.DepartedLinger = cmp.Or(c.DepartedLinger, d.DepartedLinger)
	c.PreviousTokenGrace = cmp.Or(c.PreviousTokenGrace, d.PreviousTokenGrace)
	c.SendQueue = cmp.Or(c.SendQueue, d.SendQueue)
	c.BackoffMin, c.BackoffMax = backoff.Bounds(c.BackoffMin, c.BackoffMax)
	c.Logger = cmp.Or(c.Logger, d.Logger)
	return c
}

// ErrInvalidConfig is wrapped by every error Config.Validate returns.
var ErrInvalidConfig = errors.New("invalid replica sync configuration")

// Validate checks the configuration as Start will use it, zero fields
// replaced by their defaults (so a zero is always valid).
func (c Config) Validate() error {
	c = c.withDefaults()
	var errs []error
	if c.NodeID == "" || c.Apply == nil {
		errs = append(errs, invalidConfig("NodeID and Apply are required"))
	}
	if err := ValidateListen(c.Listen); err != nil {
		errs = append(errs, fmt.Errorf("%w: Listen: %w", ErrInvalidConfig, err))
	}
	for _, ep := range append([]string{c.Advertise}, c.Peers...) {
		if ep == "" {
			continue
		}
		if err := ValidateEndpoint(ep); err != nil {
			errs = append(errs, fmt.Errorf("%w: Advertise/Peers (--replica-sync-advertise, --replica-sync-peers): %w", ErrInvalidConfig, err))
		}
	}
	if c.AntiEntropyPeriod < 0 {
		errs = append(errs, invalidConfig("AntiEntropyPeriod must be positive, got %s", c.AntiEntropyPeriod))
	}
	if c.SendQueue < 1 {
		errs = append(errs, invalidConfig("SendQueue must be at least 1, got %d", c.SendQueue))
	}
	if c.BackoffMin < 0 {
		errs = append(errs, invalidConfig("BackoffMin must be positive, got %s", c.BackoffMin))
	}
	return errors.Join(errs...)
}

// ValidateListen checks an endpoint to bind: tcp://host:port, where the
// host may be empty or a wildcard and port 0 lets the OS choose.
func ValidateListen(ep string) error {
	u, err := url.Parse(ep)
	if err != nil || u.Scheme != "tcp" || u.Host == "" || u.Path != "" || u.RawQuery != "" || u.User != nil {
		return fmt.Errorf("%w: %q is not tcp://host:port", ErrEndpoint, ep)
	}
	_, port, err := net.SplitHostPort(u.Host)
	if err != nil {
		return fmt.Errorf("%w: %q is not tcp://host:port", ErrEndpoint, ep)
	}
	if n, err := strconv.Atoi(port); err != nil || n < 0 || n > 65535 {
		return fmt.Errorf("%w: %q: the port must be from 0 (the OS chooses) to 65535", ErrEndpoint, ep)
	}
	return nil
}

func invalidConfig(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrInvalidConfig}, args...)...)
}
