package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/kvselect/kvselect/internal/version"
	"github.com/kvselect/kvselect/server"
	"github.com/kvselect/kvselect/server/nodeflags"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "kvselect:", err)
		os.Exit(nodeflags.ExitCode(err))
	}
}

func run(args []string) error {
	if len(args) > 0 {
		switch args[0] {
		case nodeflags.SlotTrackerCommand:
			return runSlotTracker(args[1:])
		case "help":
			return runHelp(args[1:])
		}
	}
	cfg, err := nodeflags.Parse(args)
	if stop, err := parsed(err); stop {
		return err
	}
	// Signals are caught before the start is logged: whoever waits for
	// that line may signal at once (and SIGHUP would otherwise kill).
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	defer signal.Stop(sig)
	srv, err := server.Start(cfg)
	if err != nil {
		return err
	}
	waitForStop(srv, sig, cfg.Logger)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return srv.Close(ctx)
}

// waitForStop returns on SIGINT or SIGTERM, or once the node has been
// removed from the cluster: like a removed etcd member, it stops (and the
// process exits 0) rather than serve a frozen catalog. SIGHUP reads the
// token files and the TLS certificate again.
func waitForStop(srv *server.Server, sig <-chan os.Signal, log *slog.Logger) {
	for {
		select {
		case s := <-sig:
			if s == syscall.SIGHUP {
				_ = srv.Reload() // logs what it did; a bad file keeps what it would replace
				continue
			}
			log.Info("signal received, shutting down", "signal", s.String())
		case <-srv.Removed():
			log.Info("removed from the cluster, shutting down")
		}
		return
	}
}

// parsed handles how parsing the command line may end a command before
// it starts: -h (the help is printed), --version, or a bad flag.
func parsed(err error) (stop bool, _ error) {
	switch {
	case errors.Is(err, flag.ErrHelp):
		return true, nil
	case errors.Is(err, nodeflags.ErrVersion):
		fmt.Println("kvselect", version.Get())
		return true, nil
	}
	return err != nil, err
}

// runHelp is "kvselect help [command]": the help of the node or of the
// slot tracker, as --help prints it.
func runHelp(args []string) error {
	switch {
	case len(args) == 0:
		_, err := nodeflags.Parse([]string{"--help"})
		return ignoreHelp(err)
	case len(args) == 1 && args[0] == nodeflags.SlotTrackerCommand:
		_, err := parseSlotTrackerConfig([]string{"--help"})
		return ignoreHelp(err)
	}
	msg := fmt.Sprintf("help: unknown command %q (kvselect has one: %s)", strings.Join(args, " "), nodeflags.SlotTrackerCommand)
	return &nodeflags.UsageError{Msg: msg, Help: "kvselect"}
}

func ignoreHelp(err error) error {
	if errors.Is(err, flag.ErrHelp) {
		return nil
	}
	return err
}
