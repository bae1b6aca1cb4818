package kvsim

import (
	"cmp"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"strings"
	"time"
)

// Encoding selects how each event inside a batch is encoded. The batch
// itself is always the array [ts, events, data_parallel_rank].
type Encoding int

const (
	// EncodingArray encodes events as tagged arrays, vLLM's default
	// (msgspec array_like): ["BlockStored", hashes, parent, ...].
	EncodingArray Encoding = iota
	// EncodingMap encodes events as maps with a "type" key, as newer vLLM
	// releases can: {"type": "BlockStored", "block_hashes": ..., ...}.
	EncodingMap
)

// String returns the name ParseEncoding accepts.
func (e Encoding) String() string {
	switch e {
	case EncodingArray:
		return "array"
	case EncodingMap:
		return "map"
	default:
		return fmt.Sprintf("Encoding(%d)", int(e))
	}
}

// ParseEncoding parses "array" or "map" (case-insensitive).
func ParseEncoding(s string) (Encoding, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "array":
		return EncodingArray, nil
	case "map":
		return EncodingMap, nil
	default:
		return 0, fmt.Errorf("%w: encoding %q (want array or map)", ErrInvalidConfig, s)
	}
}

// Defaults applied by Start to zero-valued Config fields.
const (
	DefaultWorkers       = 1
	DefaultFirstWorkerID = 1
	DefaultDPSize        = 1
	DefaultBlockSize     = 16
	DefaultCacheBlocks   = 4096
	DefaultReplayBuffer  = 10000
	DefaultHost          = "127.0.0.1"
	DefaultName          = "default"
	DefaultTopic         = "kv-events"
)

// Upper bounds on Config, so that a typo cannot exhaust ports or memory.
const (
	MaxRanks        = 4096    // Workers × DPSize
	MaxBlockSize    = 1 << 16 // tokens per block
	MaxCacheBlocks  = 1 << 24 // blocks per rank
	MaxReplayBuffer = 1 << 20 // messages per rank
)

// pubHWM bounds each PUB socket's send queue; past it zmq4 drops messages,
// which subscribers see as a sequence gap (and recover by replay).
const pubHWM = 100000

// Config describes a set of simulated workers. Zero values take the
// defaults above.
type Config struct {
	Workers       int    // number of workers
	FirstWorkerID uint64 // worker i gets FirstWorkerID+i
	DPSize        int    // data-parallel ranks per worker; global ranks are 0..DPSize-1
	BlockSize     int    // tokens per KV block
	CacheBlocks   int    // per-rank block cache capacity (LRU)
	Encoding      Encoding
	ReplayBuffer  int    // messages kept per rank for replay
	Host          string // bind host for every socket
	// AdvertiseHost is the host written into the registration endpoints.
	// Default: Host, or 127.0.0.1 when Host is a wildcard (0.0.0.0, ::).
	AdvertiseHost string
	Model         string // model_name of every worker
	Tenant        string // tenant_id of every worker
	Topic         string // first frame of every published message
	// ReplayWithTopic makes replay replies [identity, "", topic, seq,
	// payload] instead of vLLM's [identity, "", seq, payload].
	ReplayWithTopic bool
	// AuthToken, when set, is sent as a bearer token on every call to
	// kvselect: Register and KeepLeases (POST /workers needs the admin
	// token) and trace-replay selections.
	AuthToken string
	// CAFile, when set, names the PEM CA certificates that sign the
	// kvselect nodes' HTTPS certificates (default: the system's roots).
	CAFile string
	// EndpointBase is the base URL of the HTTP API that serves these
	// workers, such as cmd/kvsim's control API (http://127.0.0.1:8093).
	// Worker id registers EndpointBase/workers/{id} as its endpoint, where
	// that API answers GET (the registration) and POST .../prompt (serve
	// a prompt on the worker). Empty: nothing serves the workers over
	// HTTP, and the endpoint is the label kvsim://AdvertiseHost/workers/{id}.
	EndpointBase string
	// LeaseTTL, when not 0, registers every worker with that lease
	// (whole seconds, 1s-1h; SPEC §3.7): KeepLeases must then renew them,
	// and once the simulator stops they lapse and kvselect drops the
	// workers. 0: no lease; the workers stay until deleted.
	LeaseTTL time.Duration
	// Log receives the simulator's logs. Default: discarded.
	Log *slog.Logger
}

// ErrInvalidConfig is wrapped by every configuration error.
var ErrInvalidConfig = errors.New("kvsim: invalid config")

// withDefaults returns cfg with zero fields set to their defaults.
func (cfg Config) withDefaults() Config {
	cfg.Workers = cmp.Or(cfg.Workers, DefaultWorkers)
	cfg.FirstWorkerID = cmp.Or(cfg.FirstWorkerID, DefaultFirstWorkerID)
	cfg.DPSize = cmp.Or(cfg.DPSize, DefaultDPSize)
	cfg.BlockSize = cmp.Or(cfg.BlockSize, DefaultBlockSize)
	cfg.CacheBlocks = cmp.Or(cfg.CacheBlocks, DefaultCacheBlocks)
	cfg.ReplayBuffer = cmp.Or(cfg.ReplayBuffer, DefaultReplayBuffer)
	cfg.Host = cmp.Or(cfg.Host, DefaultHost)
	if cfg.AdvertiseHost == "" {
		cfg.AdvertiseHost = advertiseFor(cfg.Host)
	}
	cfg.EndpointBase = strings.TrimRight(cfg.EndpointBase, "/")
	cfg.Model = cmp.Or(cfg.Model, DefaultName)
	cfg.Tenant = cmp.Or(cfg.Tenant, DefaultName)
	cfg.Topic = cmp.Or(cfg.Topic, DefaultTopic)
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	return cfg
}

// advertiseFor maps a wildcard bind host to loopback, which is the only
// address a wildcard is sure to be reachable on.
func advertiseFor(host string) string {
	if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
		return DefaultHost
	}
	return host
}

// validate checks a Config that already has its defaults.
func (cfg Config) validate() error {
	switch {
	case cfg.Workers < 1:
		return fmt.Errorf("%w: workers must be at least 1, got %d", ErrInvalidConfig, cfg.Workers)
	case cfg.DPSize < 1:
		return fmt.Errorf("%w: dp size must be at least 1, got %d", ErrInvalidConfig, cfg.DPSize)
	case cfg.Workers > MaxRanks || cfg.DPSize > MaxRanks || cfg.Workers*cfg.DPSize > MaxRanks:
		return fmt.Errorf("%w: workers × dp size = %d exceeds %d", ErrInvalidConfig, cfg.Workers*cfg.DPSize, MaxRanks)
	case cfg.FirstWorkerID+uint64(cfg.Workers-1) < cfg.FirstWorkerID:
		return fmt.Errorf("%w: worker ids overflow from first worker id %d", ErrInvalidConfig, cfg.FirstWorkerID)
	case cfg.BlockSize < 1 || cfg.BlockSize > MaxBlockSize:
		return fmt.Errorf("%w: block size must be in [1, %d], got %d", ErrInvalidConfig, MaxBlockSize, cfg.BlockSize)
	case cfg.CacheBlocks < 1 || cfg.CacheBlocks > MaxCacheBlocks:
		return fmt.Errorf("%w: cache blocks must be in [1, %d], got %d", ErrInvalidConfig, MaxCacheBlocks, cfg.CacheBlocks)
	case cfg.ReplayBuffer < 1 || cfg.ReplayBuffer > MaxReplayBuffer:
		return fmt.Errorf("%w: replay buffer must be in [1, %d], got %d", ErrInvalidConfig, MaxReplayBuffer, cfg.ReplayBuffer)
	case cfg.Encoding != EncodingArray && cfg.Encoding != EncodingMap:
		return fmt.Errorf("%w: unknown encoding %d", ErrInvalidConfig, int(cfg.Encoding))
	case cfg.LeaseTTL != 0 && (cfg.LeaseTTL < time.Second || cfg.LeaseTTL > time.Hour || cfg.LeaseTTL%time.Second != 0):
		return fmt.Errorf("%w: lease TTL must be 0 or whole seconds from 1s to 1h, got %s", ErrInvalidConfig, cfg.LeaseTTL)
	}
	return validateEndpointBase(cfg.EndpointBase)
}

// validateEndpointBase accepts "" or an absolute http(s) URL with a host
// and no query or fragment, so that appending /workers/{id} gives a URL.
func validateEndpointBase(base string) error {
	if base == "" {
		return nil
	}
	u, err := url.Parse(base)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" {
		return fmt.Errorf("%w: endpoint base %q is not an http(s) URL without query or fragment", ErrInvalidConfig, base)
	}
	return nil
}
