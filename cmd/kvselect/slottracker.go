package main

import (
	"context"
	"flag"
	"fmt"
	"math"
	"net"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"github.com/kvselect/kvselect/internal/envflag"
	"github.com/kvselect/kvselect/server/nodeflags"
	"github.com/kvselect/kvselect/slottracker"
)

// runSlotTracker is `kvselect slot-tracker`: seed 003's API until SIGINT
// or SIGTERM.
func runSlotTracker(args []string) error {
	cfg, err := parseSlotTrackerConfig(args)
	if stop, err := parsed(err); stop {
		return err
	}
	// Signals are caught before the start is logged: whoever waits for
	// that line may signal at once.
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	defer signal.Stop(sig)
	srv, err := slottracker.Start(cfg)
	if err != nil {
		return err
	}
	s := <-sig
	cfg.Logger.Info("signal received, shutting down", "signal", s.String())
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return srv.Close(ctx)
}

// parseSlotTrackerConfig reads the slot tracker's flags, then the same
// KVSELECT_<FLAG> (and DYN_*) variables as the node's.
func parseSlotTrackerConfig(args []string) (slottracker.Config, error) {
	defaults := slottracker.DefaultConfig()
	fs := flag.NewFlagSet("kvselect "+nodeflags.SlotTrackerCommand, flag.ContinueOnError)
	var (
		port       = fs.Int("port", 8091, "HTTP port")
		bind       = fs.String("bind", "0.0.0.0", "address the HTTP API binds (no authentication: keep it on a trusted network)")
		logLevel   = fs.String("log-level", "info", "debug, info, warn or error")
		logFormat  = fs.String("log-format", "text", "text or json")
		expirySecs = fs.Float64("active-request-expiry-secs", defaults.ActiveRequestExpiry.Seconds(), "free requests this long after /add")
	)
	nodeflags.Env.Annotate(fs)
	showVersion := fs.Bool("version", false, "print the version, commit and Go version, and exit")
	if err := slotTrackerCmd.Parse(fs, args); err != nil {
		return slottracker.Config{}, err
	}
	if *showVersion {
		return slottracker.Config{}, nodeflags.ErrVersion
	}
	if err := nodeflags.Env.Apply(fs); err != nil {
		return slottracker.Config{}, err
	}
	if *port < 0 || *port > 65535 {
		return slottracker.Config{}, fmt.Errorf("--port (env %s) must be from 0 to 65535, got %d", envflag.Name(nodeflags.Env.Prefix, "port"), *port)
	}
	expiry := time.Duration(*expirySecs * float64(time.Second))
	if math.IsNaN(*expirySecs) || *expirySecs <= 0 || *expirySecs > math.MaxInt64/float64(time.Second) || expiry <= 0 {
		return slottracker.Config{}, fmt.Errorf("--active-request-expiry-secs (env %s) must be positive, got %v",
			envflag.Name(nodeflags.Env.Prefix, "active-request-expiry-secs"), *expirySecs)
	}
	logger, err := nodeflags.NewLogger(*logLevel, *logFormat)
	if err != nil {
		return slottracker.Config{}, err
	}
	return slottracker.Config{
		Addr: net.JoinHostPort(*bind, strconv.Itoa(*port)), ActiveRequestExpiry: expiry, Logger: logger,
	}, nil
}

// slotTrackerCmd is kvselect slot-tracker.
var slotTrackerCmd = nodeflags.Command{Path: "kvselect " + nodeflags.SlotTrackerCommand, Header: fmt.Sprintf("Usage: kvselect %s [flags]\n\n"+
	"Serves Dynamo's standalone slot tracker API (register, unregister, workers, add,\n"+
	"prefill_complete, free, loads, potential_loads, health) on kvselect's active-load\n"+
	"accounting, and Prometheus metrics at /metrics. State is in memory only.\n", nodeflags.SlotTrackerCommand)}
