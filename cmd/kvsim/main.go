package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/kvselect/kvselect/client"
	"github.com/kvselect/kvselect/internal/version"
	"github.com/kvselect/kvselect/kvsim"
)

// Registration retry: kvselect may still be starting (or electing a
// leader) when kvsim comes up.
const (
	registerAttempts   = 8
	registerFirstPause = 250 * time.Millisecond
	registerMaxPause   = 4 * time.Second
	shutdownTimeout    = 5 * time.Second
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)

	if err := run(ctx, os.Args[1:], os.Stdout, os.Stderr, hup); err != nil {
		fmt.Fprintln(os.Stderr, "kvsim:", err)
		os.Exit(1)
	}
}

// run starts the simulator and serves until ctx ends. Each value on hup
// resets every rank of every worker.
func run(ctx context.Context, args []string, stdout, stderr io.Writer, hup <-chan os.Signal) error {
	cfg, err := parseConfig(args, stderr)
	if errors.Is(err, errVersion) {
		fmt.Fprintln(stdout, "kvsim", version.Get())
		return nil
	}
	if errors.Is(err, flag.ErrHelp) {
		return nil
	}
	if err != nil {
		return err
	}
	logger := newLogger(stderr, cfg.logLevel, cfg.logFormat)
	cfg.sim.Log = logger

	var trace []kvsim.TraceRequest
	if cfg.trace != "" {
		if trace, err = readTraceFile(cfg.trace); err != nil {
			return err
		}
	}

	// The control API is bound before the workers start because it serves
	// them: each worker registers its URL under the API as its endpoint.
	var ctlLn net.Listener
	if cfg.control != "" {
		if ctlLn, err = net.Listen("tcp", cfg.control); err != nil {
			return fmt.Errorf("--control: %w", err)
		}
		cfg.sim.EndpointBase = controlURL(ctlLn.Addr(), cfg.sim.AdvertiseHost)
	}
	sim, err := kvsim.Start(cfg.sim)
	if err != nil {
		if ctlLn != nil {
			_ = ctlLn.Close()
		}
		return err
	}
	defer func() {
		if err := sim.Close(); err != nil {
			logger.Warn("closing the simulator", "err", err)
		}
	}()
	printWorkers(stdout, sim)

	if ctlLn != nil {
		ctl := serveControl(ctlLn, sim, logger)
		defer ctl.close(logger)
		fmt.Fprintf(stdout, "control API on %s\n", sim.Config().EndpointBase)
	}

	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer func() {
		cancel()
		wg.Wait()
	}()
	wg.Add(1)
	go func() {
		defer wg.Done()
		resetOnSignal(ctx, sim, hup, logger)
	}()

	if cfg.register != "" {
		if err := registerWithRetry(ctx, sim, cfg.register, logger); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "registered %d workers with %s\n", len(sim.Workers()), cfg.register)
		if ttl := sim.Config().LeaseTTL; ttl > 0 {
			fmt.Fprintf(stdout, "keeping their %s leases alive; kvselect drops the workers once kvsim stops\n", ttl)
			wg.Add(1)
			go func() {
				defer wg.Done()
				_ = sim.KeepLeases(ctx, cfg.register)
			}()
		}
	}
	if trace != nil {
		stats, err := kvsim.ReplayTrace(ctx, sim, trace, kvsim.ReplayOptions{
			TraceBlockTokens: cfg.traceBlockTokens,
			SelectURL:        cfg.traceSelect,
			Limit:            cfg.traceLimit,
			Speed:            cfg.traceSpeed,
			Log:              logger,
		})
		if err != nil && ctx.Err() == nil {
			return err
		}
		fmt.Fprintf(stdout, "trace replay: %s\n", stats)
		if cfg.exitAfterTrace {
			logger.Info("trace replay finished; exiting (--exit-after-trace)")
			return nil
		}
	}

	<-ctx.Done()
	logger.Info("shutting down")
	return nil
}

func readTraceFile(path string) ([]kvsim.TraceRequest, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("--trace: %w", err)
	}
	defer f.Close()
	reqs, err := kvsim.ReadTrace(f)
	if err != nil {
		return nil, fmt.Errorf("--trace %s: %w", path, err)
	}
	return reqs, nil
}

// printWorkers writes one line per worker with its endpoints.
func printWorkers(w io.Writer, sim *kvsim.Sim) {
	for _, wk := range sim.Workers() {
		reg := wk.Registration()
		ranks := make([]string, 0, reg.DataParallelSize)
		for rank := reg.DataParallelStartRank; rank < reg.DataParallelStartRank+max(reg.DataParallelSize, 1); rank++ {
			ranks = append(ranks, strconv.FormatUint(uint64(rank), 10)+"="+reg.KVEventsEndpoints[rank])
		}
		fmt.Fprintf(w, "worker %d model=%s tenant=%s block_size=%d kv_events=%s replay=%s endpoint=%s\n",
			reg.WorkerID, reg.ModelName, reg.TenantID, reg.BlockSize, strings.Join(ranks, ","), reg.ReplayEndpoint, reg.Endpoint)
	}
}

// resetOnSignal resets every rank of every worker (AllBlocksCleared) for
// each value received on hup, until ctx ends.
func resetOnSignal(ctx context.Context, sim *kvsim.Sim, hup <-chan os.Signal, log *slog.Logger) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-hup:
			for _, wk := range sim.Workers() {
				if err := wk.Reset(kvsim.AllRanks); err != nil {
					log.Warn("reset failed", "worker_id", wk.ID(), "err", err)
				}
			}
			log.Info("reset every rank of every worker", "workers", len(sim.Workers()))
		}
	}
}

// registerWithRetry registers the workers, retrying with backoff while the
// node is unreachable or answers 5xx (not up, no leader yet). A 4xx is a
// configuration problem and fails at once.
func registerWithRetry(ctx context.Context, sim *kvsim.Sim, url string, log *slog.Logger) error {
	pause := registerFirstPause
	var err error
	for attempt := 1; attempt <= registerAttempts; attempt++ {
		if err = sim.Register(ctx, url); err == nil {
			return nil
		}
		var herr *client.Error
		if errors.As(err, &herr) && herr.Status < 500 {
			return err
		}
		if attempt == registerAttempts {
			break
		}
		log.Warn("registration failed, retrying", "url", url, "attempt", attempt, "pause", pause, "err", err)
		timer := time.NewTimer(pause)
		select {
		case <-ctx.Done():
			timer.Stop()
			return ctx.Err()
		case <-timer.C:
		}
		pause = min(2*pause, registerMaxPause)
	}
	return fmt.Errorf("register with %s: giving up after %d attempts: %w", url, registerAttempts, err)
}

// controlServer is the running control API.
type controlServer struct {
	srv  *http.Server
	done chan struct{} // closed when Serve returns
}

// controlURL is the base URL callers reach the control API at, bound on
// addr: the advertised host when there is one, loopback for a wildcard
// bind, and always the port actually bound (--control host:0 included).
func controlURL(addr net.Addr, advertise string) string {
	host, port, err := net.SplitHostPort(addr.String())
	if err != nil {
		return "http://" + addr.String()
	}
	if advertise != "" {
		host = advertise
	} else if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
		host = kvsim.DefaultHost
	}
	return "http://" + net.JoinHostPort(host, port)
}

// serveControl serves the control API on ln until close.
func serveControl(ln net.Listener, sim *kvsim.Sim, log *slog.Logger) *controlServer {
	api := &controlAPI{sim: sim, log: log}
	c := &controlServer{
		srv: &http.Server{
			Handler:           api.handler(),
			ReadHeaderTimeout: 5 * time.Second,
			ReadTimeout:       30 * time.Second,
			WriteTimeout:      30 * time.Second,
			IdleTimeout:       2 * time.Minute,
		},
		done: make(chan struct{}),
	}
	go func() {
		defer close(c.done)
		if err := c.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("control API stopped", "err", err)
		}
	}()
	return c
}

func (c *controlServer) close(log *slog.Logger) {
	ctx, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
	defer cancel()
	if err := c.srv.Shutdown(ctx); err != nil {
		log.Warn("control API shutdown", "err", err)
		_ = c.srv.Close()
	}
	<-c.done
}
