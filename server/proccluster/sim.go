package proccluster

import (
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/kvselect/kvselect/api"
	"github.com/kvselect/kvselect/internal/childproc"
	"github.com/kvselect/kvselect/internal/poll"
	"github.com/kvselect/kvselect/internal/zmqx"
	"github.com/kvselect/kvselect/kvsim"
)

// SimConfig describes one kvsim process.
type SimConfig struct {
	Bin     string // the kvsim binary
	Name    string // names it in errors and its log (Dir/<Name>.log); default "kvsim"
	Dir     string
	Tag     string // heads each start line of its log
	Control string // --control host:port
	// Workers is how many workers it lists once up (--workers is in Args).
	Workers int
	// Args are its other flags.
	Args []string
	// HTTPClient is the control client's transport (default: one with a
	// 2 s timeout).
	HTTPClient *http.Client
}

// Sim is a kvsim process and the client of its control API.
type Sim struct {
	Proc    *childproc.Proc
	URL     string // the control API's base URL
	Control *kvsim.ControlClient
}

// NewSim prepares a kvsim process without starting it.
func NewSim(cfg SimConfig) *Sim {
	if cfg.Name == "" {
		cfg.Name = "kvsim"
	}
	if cfg.HTTPClient == nil {
		cfg.HTTPClient = &http.Client{Timeout: 2 * time.Second}
	}
	url := "http://" + cfg.Control
	return &Sim{
		Proc: &childproc.Proc{Tag: cfg.Tag, Name: cfg.Name, Path: cfg.Bin, LogPath: filepath.Join(cfg.Dir, cfg.Name+".log"),
			Args: append([]string{"--control", cfg.Control}, cfg.Args...)},
		URL:     url,
		Control: &kvsim.ControlClient{BaseURL: url, HTTP: cfg.HTTPClient},
	}
}

// StartSim starts a kvsim process and waits until its control API lists
// workers of them, returning their registrations.
func StartSim(ctx context.Context, cfg SimConfig) (*Sim, []api.WorkerFields, error) {
	s := NewSim(cfg)
	if err := s.Proc.Start(); err != nil {
		return nil, nil, err
	}
	regs, err := s.WaitWorkers(ctx, cfg.Workers)
	if err != nil {
		s.Close()
		return nil, nil, err
	}
	return s, regs, nil
}

// WaitWorkers waits until the control API lists n workers and returns
// their registrations; it fails at once if the process exits.
func (s *Sim) WaitWorkers(ctx context.Context, n int) ([]api.WorkerFields, error) {
	var regs []api.WorkerFields
	err := poll.Until(ctx, PollEvery, s.Proc.Name+" lists its workers", func(ctx context.Context) error {
		if err := s.Exited(); err != nil {
			return poll.Fatal(err)
		}
		var err error
		if regs, err = s.Control.Workers(ctx); err != nil {
			return err
		}
		if len(regs) != n {
			return fmt.Errorf("%s lists %d workers, want %d", s.Proc.Name, len(regs), n)
		}
		return nil
	})
	return regs, err
}

// Exited says whether the process exited on its own, naming its log.
func (s *Sim) Exited() error {
	if err := s.Proc.ExitedOnItsOwn(); err != nil {
		return fmt.Errorf("%s exited: %v (see %s)", s.Proc.Name, err, s.Proc.LogPath)
	}
	return nil
}

// Close stops the process (SIGTERM, SIGKILL after 3 s) and waits for it.
func (s *Sim) Close() { s.Proc.Stop(syscall.SIGTERM, 3*time.Second) }

// WorkerAddrs are the addresses a node dials for the workers of regs:
// each rank's event stream and, when the worker has one, its replay
// endpoint; for Config.Workers, so that every node reaches them through
// links of its own.
func WorkerAddrs(regs []api.WorkerFields) ([]WorkerAddr, error) {
	var out []WorkerAddr
	for _, reg := range regs {
		if reg.WorkerID == nil || reg.KVEventsEndpoints == nil {
			return nil, fmt.Errorf("registration without worker_id or kv_events_endpoints: %+v", reg)
		}
		eps := *reg.KVEventsEndpoints
		ranks := make([]uint32, 0, len(eps))
		for r := range eps {
			ranks = append(ranks, r)
		}
		slices.Sort(ranks)
		for _, r := range ranks {
			byKind := map[string]string{KindKV: eps[r]}
			if reg.ReplayEndpoint != nil && *reg.ReplayEndpoint != "" {
				ep, err := zmqx.RankEndpoint(*reg.ReplayEndpoint, r)
				if err != nil {
					return nil, err
				}
				byKind[KindReplay] = ep
			}
			for _, kind := range []string{KindKV, KindReplay} {
				ep, ok := byKind[kind]
				if !ok {
					continue
				}
				addr, ok := strings.CutPrefix(ep, "tcp://")
				if !ok {
					return nil, fmt.Errorf("worker %d endpoint %q is not tcp", *reg.WorkerID, ep)
				}
				out = append(out, WorkerAddr{Worker: *reg.WorkerID, Rank: r, Kind: kind, Addr: addr})
			}
		}
	}
	return out, nil
}

// Register upserts regs through the leader the live nodes agree on.
func (c *Cluster) Register(ctx context.Context, regs []api.WorkerFields) error {
	leader, err := c.WaitLeader(ctx, nil)
	if err != nil {
		return err
	}
	for _, reg := range regs {
		if _, err := c.nodes[leader].Client.UpsertWorker(ctx, reg); err != nil {
			id := "without an id"
			if reg.WorkerID != nil {
				id = fmt.Sprint(*reg.WorkerID)
			}
			return fmt.Errorf("register worker %s: %w", id, err)
		}
	}
	return nil
}
