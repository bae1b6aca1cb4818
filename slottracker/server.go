package slottracker

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"time"
)

// Config is what a slot tracker process needs.
type Config struct {
	// Addr is the HTTP listen address, host:port (port 0 picks one).
	Addr string
	// ActiveRequestExpiry frees a request this long after /add if nobody
	// freed it.
	ActiveRequestExpiry time.Duration
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// Logger; nil means slog.Default().
	Logger *slog.Logger
}

// DefaultConfig is seed 003's: port 8091 on every interface, 300 s expiry.
func DefaultConfig() Config {
	return Config{Addr: "0.0.0.0:8091", ActiveRequestExpiry: 300 * time.Second}
}

// Server is a running slot tracker: its Service behind an HTTP listener.
type Server struct {
	Service *Service
	ln      net.Listener
	http    *http.Server
	log     *slog.Logger
	done    chan struct{} // closed when the HTTP server's goroutine returns
}

// Start listens on cfg.Addr and serves the API until Close. The listener
// is bound when Start returns, so /health answers at once.
func Start(cfg Config) (*Server, error) {
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	svc, err := NewService(cfg.ActiveRequestExpiry, cfg.Now, log)
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		return nil, err
	}
	s := &Server{
		Service: svc, ln: ln, log: log, done: make(chan struct{}),
		// Bounded everything (SPEC §11): a slow or stuck client cannot
		// hold a connection forever.
		http: &http.Server{Handler: svc.Handler(), ReadHeaderTimeout: 10 * time.Second,
			ReadTimeout: 30 * time.Second, WriteTimeout: 30 * time.Second, IdleTimeout: 2 * time.Minute},
	}
	go func() {
		defer close(s.done)
		if err := s.http.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("slot tracker http server stopped", "err", err)
		}
	}()
	log.Info("slot tracker started", "http", ln.Addr().String(), "active_request_expiry", cfg.ActiveRequestExpiry)
	log.Warn("slot tracker runs without authentication: run it on a trusted network")
	return s, nil
}

// Addr is the address the listener is bound to.
func (s *Server) Addr() string { return s.ln.Addr().String() }

// Close stops accepting requests, waits for those in flight (until ctx
// ends), then stops the service's sweepers.
func (s *Server) Close(ctx context.Context) error {
	err := s.http.Shutdown(ctx)
	<-s.done
	s.Service.Close()
	return err
}
