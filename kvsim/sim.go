package kvsim

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/go-zeromq/zmq4"

	"github.com/kvselect/kvselect/api"
)

// Sim is a set of running simulated workers. Close stops every socket and
// goroutine it started.
type Sim struct {
	cfg     Config
	workers []*Worker
	byID    map[uint64]*Worker

	cancel    context.CancelFunc // stops the sockets' contexts
	wg        sync.WaitGroup     // replay goroutines, one per rank
	closeOnce sync.Once
	closeErr  error
}

// Start binds every worker's sockets and starts serving replay. On error
// nothing is left running.
func Start(cfg Config) (*Sim, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &Sim{
		cfg:    cfg,
		byID:   make(map[uint64]*Worker, cfg.Workers),
		cancel: cancel,
	}
	for i := range cfg.Workers {
		id := cfg.FirstWorkerID + uint64(i)
		w, err := s.startWorker(ctx, id)
		if err != nil {
			_ = s.Close()
			return nil, fmt.Errorf("kvsim: start worker %d: %w", id, err)
		}
		s.workers = append(s.workers, w)
		s.byID[id] = w
	}
	return s, nil
}

// startWorker binds one PUB per rank and DPSize consecutive ROUTERs, then
// starts one replay goroutine per rank.
func (s *Sim) startWorker(ctx context.Context, id uint64) (*Worker, error) {
	cfg := s.cfg
	pubs := make([]zmq4.Socket, 0, cfg.DPSize)
	pubPorts := make([]int, 0, cfg.DPSize)
	for range cfg.DPSize {
		pub, port, err := listenPub(ctx, cfg.Host)
		if err != nil {
			closeAll(pubs)
			return nil, err
		}
		pubs = append(pubs, pub)
		pubPorts = append(pubPorts, port)
	}
	routers, replayBase, err := listenRouters(ctx, cfg.Host, cfg.DPSize)
	if err != nil {
		closeAll(pubs)
		return nil, err
	}

	w := &Worker{id: id, blockSize: cfg.BlockSize, reg: s.registration(id, pubPorts, replayBase)}
	for rank := range cfg.DPSize {
		r := &rankState{
			workerID:  id,
			rank:      rank,
			blockSize: cfg.BlockSize,
			topic:     []byte(cfg.Topic),
			pub:       pubs[rank],
			router:    routers[rank],
			replayEP:  tcpEndpoint(cfg.AdvertiseHost, replayBase+rank),
			withTopic: cfg.ReplayWithTopic,
			log:       cfg.Log.With("worker_id", id, "dp_rank", rank),
			now:       time.Now,
			cache:     newBlockCache(cfg.CacheBlocks),
			enc:       newBatchEncoder(cfg.Encoding),
			ring:      newReplayRing(cfg.ReplayBuffer),
		}
		w.ranks = append(w.ranks, r)
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			r.serveReplay(ctx)
		}()
	}
	cfg.Log.Info("worker started", "worker_id", id, "kv_events_endpoints", w.reg.KVEventsEndpoints, "replay_endpoint", w.reg.ReplayEndpoint)
	return w, nil
}

func (s *Sim) registration(id uint64, pubPorts []int, replayBase int) api.WorkerSpec {
	cfg := s.cfg
	events := make(map[uint32]string, len(pubPorts))
	for rank, port := range pubPorts {
		events[uint32(rank)] = tcpEndpoint(cfg.AdvertiseHost, port)
	}
	return api.WorkerSpec{
		WorkerID:          id,
		ModelName:         cfg.Model,
		TenantID:          cfg.Tenant,
		Endpoint:          workerEndpoint(cfg, id),
		BlockSize:         uint32(cfg.BlockSize),
		DataParallelSize:  uint32(cfg.DPSize),
		KVEventsEndpoints: events,
		ReplayEndpoint:    tcpEndpoint(cfg.AdvertiseHost, replayBase),
		LeaseTTLSeconds:   uint32(cfg.LeaseTTL / time.Second),
	}
}

// workerEndpoint is the endpoint worker id registers: its URL under
// EndpointBase, or a kvsim:// label when nothing serves it over HTTP
// (never a made-up port).
func workerEndpoint(cfg Config, id uint64) string {
	if cfg.EndpointBase != "" {
		return fmt.Sprintf("%s/workers/%d", cfg.EndpointBase, id)
	}
	return fmt.Sprintf("kvsim://%s/workers/%d", hostForURL(cfg.AdvertiseHost), id)
}

// hostForURL brackets an IPv6 literal.
func hostForURL(host string) string {
	if strings.Contains(host, ":") {
		return "[" + host + "]"
	}
	return host
}

// Close stops every socket and goroutine. It is idempotent; later calls
// return the first call's result.
func (s *Sim) Close() error {
	s.closeOnce.Do(func() {
		// Cancelling first makes every Recv and Send return at once.
		s.cancel()
		var errs []error
		for _, w := range s.workers {
			for _, r := range w.ranks {
				if err := r.close(); err != nil {
					errs = append(errs, fmt.Errorf("worker %d rank %d: %w", w.id, r.rank, err))
				}
			}
		}
		s.wg.Wait()
		s.closeErr = errors.Join(errs...)
	})
	return s.closeErr
}

// Config returns the configuration in effect, defaults applied.
func (s *Sim) Config() Config { return s.cfg }

// Workers returns the workers in id order.
func (s *Sim) Workers() []*Worker {
	return append([]*Worker(nil), s.workers...)
}

// Worker returns the worker with that id, or nil.
func (s *Sim) Worker(id uint64) *Worker {
	return s.byID[id]
}
