package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/kvselect/kvselect/internal/authtoken"
	"github.com/kvselect/kvselect/internal/envflag"
	"github.com/kvselect/kvselect/kvsim"
)

// config is everything the command line and environment decide.
type config struct {
	sim              kvsim.Config
	register         string // kvselect URL to register the workers with
	control          string // control API address; empty disables it
	trace            string // Mooncake trace file to replay
	traceSelect      string // kvselect URL whose /select routes the trace
	traceLimit       int
	traceBlockTokens int
	traceSpeed       float64
	exitAfterTrace   bool // exit once the trace replay's report is printed
	logLevel         slog.Level
	logFormat        string
}

// errVersion is what parseConfig returns for --version.
var errVersion = errors.New("version asked")

// parseConfig turns the command line and environment into a config. Usage
// and flag errors go to output.
func parseConfig(args []string, output io.Writer) (config, error) {
	fs := flag.NewFlagSet("kvsim", flag.ContinueOnError)
	fs.SetOutput(output)
	var (
		workers          = fs.Int("workers", kvsim.DefaultWorkers, "number of simulated workers")
		firstWorkerID    = fs.Uint64("first-worker-id", kvsim.DefaultFirstWorkerID, "id of the first worker; worker i gets first+i")
		dpSize           = fs.Int("dp-size", kvsim.DefaultDPSize, "data-parallel ranks per worker")
		blockSize        = fs.Int("block-size", kvsim.DefaultBlockSize, "tokens per KV block")
		cacheBlocks      = fs.Int("cache-blocks", kvsim.DefaultCacheBlocks, "KV block cache capacity per rank (LRU)")
		encoding         = fs.String("encoding", "array", "event encoding: array or map")
		replayBuffer     = fs.Int("replay-buffer", kvsim.DefaultReplayBuffer, "messages kept per rank for replay")
		host             = fs.String("host", kvsim.DefaultHost, "host the ZMQ sockets bind")
		advertiseHost    = fs.String("advertise-host", "", "host written into the registered endpoints (default: --host; 127.0.0.1 for a wildcard)")
		model            = fs.String("model", kvsim.DefaultName, "model_name of every worker")
		tenant           = fs.String("tenant", kvsim.DefaultName, "tenant_id of every worker")
		topic            = fs.String("topic", kvsim.DefaultTopic, "topic frame of every KV event message")
		replayWithTopic  = fs.Bool("replay-with-topic", false, "answer replay with [\"\", topic, seq, payload] instead of vLLM's [\"\", seq, payload]")
		register         = fs.String("register", "", "kvselect URL to register every worker with after start (POST /workers)")
		leaseTTL         = fs.Duration("lease-ttl", 10*time.Second, "with --register: register each worker with this lease and keep it alive, so kvselect drops the workers once kvsim stops (whole seconds, 1s-1h; 0: no lease, the workers stay until deleted)")
		authTokenFile    = fs.String("auth-token-file", "", "file holding the bearer token for kvselect calls (the admin token: kvsim registers workers); of a two-line file, the first line is sent")
		tlsCAFile        = fs.String("tls-ca-file", "", "PEM CA certificates that sign the kvselect nodes' HTTPS certificates (default: the system's roots)")
		control          = fs.String("control", "127.0.0.1:8093", "address of the HTTP control API (empty disables it)")
		trace            = fs.String("trace", "", "Mooncake trace (JSON lines) to replay after start; kvsim prints a report, then keeps serving its workers until SIGINT or SIGTERM unless --exit-after-trace")
		traceSelect      = fs.String("trace-select", "", "kvselect URL whose /select chooses each trace request's worker (default: round-robin)")
		traceLimit       = fs.Int("trace-limit", 0, "replay at most this many trace requests (0 = all)")
		traceBlockTokens = fs.Int("trace-block-tokens", kvsim.DefaultTraceBlockTokens, "tokens per trace hash id")
		traceSpeed       = fs.Float64("trace-speed", 0, "pace the trace by its timestamps at this speed (1 = real time; 0 = as fast as possible)")
		exitAfterTrace   = fs.Bool("exit-after-trace", false, "exit with status 0 once the --trace replay has finished and its report is printed (default: keep serving)")
		logLevel         = fs.String("log-level", "info", "debug, info, warn or error")
		logFormat        = fs.String("log-format", "text", "text or json")
	)
	env := envflag.Env{Prefix: "KVSIM"}
	env.Annotate(fs)
	showVersion := fs.Bool("version", false, "print the version, commit and Go version, and exit")
	if err := fs.Parse(args); err != nil {
		return config{}, err
	}
	if *showVersion {
		return config{}, errVersion
	}
	if fs.NArg() > 0 {
		return config{}, fmt.Errorf("unexpected arguments: %q", fs.Args())
	}
	if err := env.Apply(fs); err != nil {
		return config{}, err
	}

	for _, pos := range []struct {
		name  string
		value int
	}{
		{"workers", *workers}, {"dp-size", *dpSize}, {"block-size", *blockSize},
		{"cache-blocks", *cacheBlocks}, {"replay-buffer", *replayBuffer}, {"trace-block-tokens", *traceBlockTokens},
	} {
		if pos.value < 1 {
			return config{}, fmt.Errorf("--%s must be at least 1, got %d", pos.name, pos.value)
		}
	}
	if *firstWorkerID == 0 {
		return config{}, errors.New("--first-worker-id must be at least 1")
	}
	if *traceLimit < 0 {
		return config{}, fmt.Errorf("--trace-limit must not be negative, got %d", *traceLimit)
	}
	if *exitAfterTrace && *trace == "" {
		return config{}, errors.New("--exit-after-trace needs --trace")
	}
	if *traceSpeed < 0 {
		return config{}, fmt.Errorf("--trace-speed must not be negative, got %g", *traceSpeed)
	}
	enc, err := kvsim.ParseEncoding(*encoding)
	if err != nil {
		return config{}, fmt.Errorf("--encoding: %w", err)
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(*logLevel)); err != nil {
		return config{}, fmt.Errorf("--log-level: %w", err)
	}
	if *logFormat != "text" && *logFormat != "json" {
		return config{}, fmt.Errorf("--log-format must be text or json, got %q", *logFormat)
	}
	lease := *leaseTTL
	if *register == "" {
		lease = 0 // nobody to keep it alive with
	}
	if lease != 0 && (lease < time.Second || lease > time.Hour || lease%time.Second != 0) {
		return config{}, fmt.Errorf("--lease-ttl must be 0 or whole seconds from 1s to 1h, got %s", lease)
	}
	var token string
	if *authTokenFile != "" {
		if token, _, err = authtoken.ReadFile(*authTokenFile); err != nil {
			return config{}, fmt.Errorf("--auth-token-file: %w", err)
		}
	}

	return config{
		sim: kvsim.Config{
			Workers:         *workers,
			FirstWorkerID:   *firstWorkerID,
			DPSize:          *dpSize,
			BlockSize:       *blockSize,
			CacheBlocks:     *cacheBlocks,
			Encoding:        enc,
			ReplayBuffer:    *replayBuffer,
			Host:            *host,
			AdvertiseHost:   *advertiseHost,
			Model:           *model,
			Tenant:          *tenant,
			Topic:           *topic,
			ReplayWithTopic: *replayWithTopic,
			AuthToken:       token,
			CAFile:          *tlsCAFile,
			LeaseTTL:        lease,
		},
		register:         *register,
		control:          *control,
		trace:            *trace,
		traceSelect:      *traceSelect,
		traceLimit:       *traceLimit,
		traceBlockTokens: *traceBlockTokens,
		traceSpeed:       *traceSpeed,
		exitAfterTrace:   *exitAfterTrace,
		logLevel:         level,
		logFormat:        *logFormat,
	}, nil
}

// newLogger builds the process logger.
func newLogger(w io.Writer, level slog.Level, format string) *slog.Logger {
	opts := &slog.HandlerOptions{Level: level}
	if format == "json" {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}
