package server

import (
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/kvselect/kvselect/api"
	"github.com/kvselect/kvselect/client"
	"github.com/kvselect/kvselect/cluster"
	"github.com/kvselect/kvselect/indexer"
	"github.com/kvselect/kvselect/internal/authtoken"
)

// Startup recovery of the KV index (SPEC §7). The index is local and in
// memory: a node that starts — joining, or restarting on its data dir —
// has none. Rather than routing blind until every worker happens to store
// its blocks again, it loads a peer's /dump and lets each KV event
// listener replay from the dump's watermark + 1, so its index converges to
// exactly the peer's.
//
// The order is what makes that exact:
//
//  1. the listeners are held (ingest.Config.Hold) from the start, so
//     nothing but the dump writes to the index while it loads;
//  2. the dump's answer names the peer's catalog index (X-Kvselect-Index);
//     the node waits to have applied it, so the dump's partitions and
//     ranks exist locally;
//  3. the dump streams into the index (indexer.LoadDump), which sets each
//     rank's watermark;
//  4. the listeners are released: each starts from its watermark and
//     replays the rest from its worker's replay endpoint.
//
// A peer that fails mid-dump leaves nothing behind: LoadDump clears every
// rank it touched, which, with the listeners held, is exactly the empty
// state the load started from, and the next peer is asked. Clearing was
// chosen over loading into a separate index and swapping it in: the index
// follows catalog changes while the dump streams (ranks come and go), and
// a staged copy would have to replay those too, for no gain in memory.
//
// Recovery runs in its own goroutine: the HTTP server and Raft run
// meanwhile, /ready says recovering, and every wait is bounded. No peer
// answering means starting empty, with a warning.

// RecoveryConfig tunes the startup recovery of the KV index. Zero values
// take the defaults.
type RecoveryConfig struct {
	// Peers are the HTTP base URLs asked for /dump, in order
	// (--indexer-peers). When empty, the other members of the cluster are
	// asked, at their published HTTP addresses; a node alone in its
	// cluster skips recovery.
	Peers []string
	// MembersWait bounds waiting for the catalog to name the current HTTP
	// address of every other member (a restarted node applies its log
	// once it hears from the leader). Default 10 s.
	MembersWait time.Duration
	// CatalogWait bounds waiting to apply the catalog index a peer's dump
	// was taken at; past it the dump loads anyway, and ranks this node
	// does not know yet replay from the start. Default 10 s.
	CatalogWait time.Duration
	// HeaderTimeout bounds waiting for a peer to start answering. Default
	// 10 s.
	HeaderTimeout time.Duration
	// StallTimeout gives up on a dump whose body stops moving for that
	// long. Default 10 s.
	StallTimeout time.Duration
	// DumpTimeout bounds one whole dump, transfer and load. Default 5 min.
	DumpTimeout time.Duration
}

func (c *RecoveryConfig) defaults() {
	for _, d := range []struct {
		v   *time.Duration
		def time.Duration
	}{
		{&c.MembersWait, 10 * time.Second}, {&c.CatalogWait, 10 * time.Second},
		{&c.HeaderTimeout, 10 * time.Second}, {&c.StallTimeout, 10 * time.Second},
		{&c.DumpTimeout, 5 * time.Minute},
	} {
		if *d.v <= 0 {
			*d.v = d.def
		}
	}
}

// ParsePeerURLs parses --indexer-peers: HTTP base URLs, comma separated;
// a bare host:port gets scheme (http, or https when the node serves TLS).
func ParsePeerURLs(s, scheme string) ([]string, error) {
	var out []string
	for _, u := range strings.Split(s, ",") {
		u = strings.TrimSpace(u)
		if u == "" {
			continue
		}
		if !strings.Contains(u, "://") {
			u = scheme + "://" + u
		}
		if !strings.HasPrefix(u, "http://") && !strings.HasPrefix(u, "https://") {
			return nil, fmt.Errorf("%w: %q is not an http(s) URL", ErrBadPeer, u)
		}
		out = append(out, strings.TrimRight(u, "/"))
	}
	return out, nil
}

// ErrBadPeer: an --indexer-peers entry that is not an HTTP URL.
var ErrBadPeer = errors.New("invalid indexer peer")

var (
	// errPeerAnswer: a peer answered /dump with an error status.
	errPeerAnswer = errors.New("peer refused the dump")
	// errStalled: a dump's body stopped moving (StallTimeout).
	errStalled = errors.New("dump stalled")
)

// Recovering reports whether the node is still recovering its KV index
// from a peer (/ready's recovering).
func (s *Server) Recovering() bool { return s.recovering.Load() }

// recovery is one startup recovery.
type recovery struct {
	cfg  RecoveryConfig
	node *cluster.Node
	ix   *indexer.Indexer
	auth *authtoken.Holder // read at each fetch: a rotation applies to the next one
	// scheme is that of the members' HTTP addresses (https with TLS).
	scheme string
	log    *slog.Logger
	hc     *http.Client
}

// startRecovery runs the recovery in its own goroutine, which the node's
// shutdown stops (s.stop) and waits for (s.wg).
func (s *Server) startRecovery() {
	ctx, cancel := context.WithCancel(context.Background())
	s.wg.Add(2)
	go func() {
		defer s.wg.Done()
		defer cancel()
		s.recoverIndex(ctx)
	}()
	go func() {
		defer s.wg.Done()
		select {
		case <-s.stop:
			cancel()
		case <-ctx.Done():
		}
	}()
}

// recoverIndex runs the recovery, then releases the listeners and clears
// the recovering flag, whatever happened.
func (s *Server) recoverIndex(ctx context.Context) {
	cfg := s.cfg.Recovery
	cfg.defaults()
	tr := http.DefaultTransport.(*http.Transport).Clone()
	// gzip is asked for and undone here, so the log can tell the bytes on
	// the wire.
	tr.DisableCompression = true
	tr.ResponseHeaderTimeout = cfg.HeaderTimeout
	if s.peerTLS != nil {
		tr.TLSClientConfig = s.peerTLS.Clone() // the transport's HTTP/2 setup writes into it
	}
	r := &recovery{cfg: cfg, node: s.Node, ix: s.Indexer, auth: s.auth, scheme: s.scheme,
		log: s.log.With("component", "recovery"), hc: &http.Client{Transport: tr}}
	start := time.Now()
	defer func() {
		tr.CloseIdleConnections()
		s.Ingest.Release()
		s.recovering.Store(false)
		r.log.Info("index recovery over; kv event listeners started", "duration", time.Since(start).Round(time.Millisecond))
	}()
	r.run(ctx)
}

// run asks the peers in turn until one dump loads whole.
func (r *recovery) run(ctx context.Context) {
	if len(r.cfg.Peers) > 0 {
		for _, u := range r.cfg.Peers {
			if r.try(ctx, u) {
				return
			}
		}
		r.log.Warn("no indexer peer answered; starting with an empty index", "peers", r.cfg.Peers)
		return
	}
	members, err := r.node.OtherMembers()
	if err != nil || len(members) == 0 {
		r.log.Info("no other cluster member: nothing to recover")
		return
	}
	tried := map[string]bool{} // by address: a member that moved is asked again
	deadline := time.NewTimer(r.cfg.MembersWait)
	defer deadline.Stop()
	poll := time.NewTicker(100 * time.Millisecond)
	defer poll.Stop()
	for {
		leaderCh, catalogCh := r.node.Changes()
		members, _ = r.node.OtherMembers()
		pending := 0
		for _, m := range members {
			addr := m.HTTPAddr
			if addr == "" {
				pending++
				continue
			}
			if tried[addr] {
				continue
			}
			tried[addr] = true
			if r.try(ctx, client.BaseURLWithScheme(r.scheme, addr)) {
				return
			}
		}
		// Every member asked: give up, unless the catalog may still be
		// behind (a restarted node before the leader's first contact)
		// and name members at addresses they have since left.
		if pending == 0 && r.catalogCurrent() {
			r.log.Warn("no cluster member answered with a dump; starting with an empty index", "members", len(members))
			return
		}
		select {
		case <-leaderCh:
		case <-catalogCh:
		case <-poll.C:
		case <-ctx.Done():
			return
		case <-deadline.C:
			r.log.Warn("no cluster member answered with a dump in time; starting with an empty index",
				"members", len(members), "address_unknown", pending, "waited", r.cfg.MembersWait)
			return
		}
	}
}

// catalogCurrent reports whether this node follows a leader and has
// applied everything it knows to be committed, so the member addresses in
// its catalog are as current as they get.
func (r *recovery) catalogCurrent() bool {
	st := r.node.Status()
	return st.Leader.ID != "" && st.AppliedIndex >= st.CommitIndex
}

// try loads one peer's dump; it reports success. A failure leaves the
// index as it was (LoadDump clears what it applied).
func (r *recovery) try(ctx context.Context, base string) bool {
	log := r.log.With("peer", base)
	log.Info("index recovery: fetching the dump")
	start := time.Now()
	st, n, err := r.load(ctx, base, log)
	if err != nil {
		if ctx.Err() == nil {
			log.Warn("index recovery from this peer failed; trying the next", "err", err,
				"partitions", st.Partitions, "events", st.Events, "bytes", n)
		}
		return false
	}
	log.Info("index recovered from peer", "partitions", st.Partitions, "events", st.Events, "blocks", st.Blocks,
		"watermarks", st.Watermarks, "skipped_events", st.Skipped, "skipped_partitions", st.SkippedPartitions,
		"bytes", n, "duration", time.Since(start).Round(time.Millisecond))
	return true
}

// load fetches base's /dump, waits for the catalog it was taken at, and
// streams it into the index. It returns what it loaded and the bytes
// received (compressed, when gzip).
func (r *recovery) load(ctx context.Context, base string, log *slog.Logger) (indexer.LoadStats, int64, error) {
	var st indexer.LoadStats
	ctx, cancelTimeout := context.WithTimeout(ctx, r.cfg.DumpTimeout)
	defer cancelTimeout()
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+api.PathDump, nil)
	if err != nil {
		return st, 0, fmt.Errorf("%w: %w", ErrBadPeer, err)
	}
	req.Header.Set(api.HeaderAcceptEncoding, api.EncodingGzip)
	if token := r.auth.Token(); token != "" {
		req.Header.Set(api.HeaderAuthorization, api.Bearer(token))
	}
	resp, err := r.hc.Do(req)
	if err != nil {
		return st, 0, fmt.Errorf("request dump: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		var e api.Error
		_ = json.NewDecoder(io.LimitReader(resp.Body, 4096)).Decode(&e)
		return st, 0, fmt.Errorf("%w: %s: %s %s", errPeerAnswer, resp.Status, e.Code, e.Message)
	}
	if h := resp.Header.Get(api.HeaderIndex); h != "" {
		// Dynamo's indexer sends none; then the local catalog is taken as
		// it is.
		idx, err := strconv.ParseUint(h, 10, 64)
		if err != nil {
			return st, 0, fmt.Errorf("%w: %s %q", errPeerAnswer, api.HeaderIndex, h)
		}
		wctx, wcancel := context.WithTimeout(ctx, r.cfg.CatalogWait)
		err = r.node.WaitApplied(wctx, idx)
		wcancel()
		if errors.Is(err, cluster.ErrClosed) || ctx.Err() != nil {
			return st, 0, fmt.Errorf("wait for the dump's catalog: %w", err)
		}
		if err != nil {
			log.Warn("catalog not caught up with the dump's; loading anyway (ranks not known here replay from their start)",
				"catalog_index", idx, "err", err)
		}
	}
	stalled := func() { cancel(fmt.Errorf("%w: no data for %v", errStalled, r.cfg.StallTimeout)) }
	body := &wireReader{r: resp.Body, stall: time.AfterFunc(r.cfg.StallTimeout, stalled), every: r.cfg.StallTimeout}
	defer body.stall.Stop()
	var in io.Reader = body
	if strings.EqualFold(resp.Header.Get(api.HeaderContentEncoding), api.EncodingGzip) {
		zr, err := gzip.NewReader(body)
		if err != nil {
			return st, body.n.Load(), fmt.Errorf("dump: %w", err)
		}
		in = zr
	}
	last := time.Now()
	st, err = r.ix.LoadDump(ctx, in, indexer.LoadOptions{Progress: func(p indexer.LoadStats) {
		if time.Since(last) >= time.Second {
			last = time.Now()
			log.Info("index recovery progress", "partitions", p.Partitions, "events", p.Events, "blocks", p.Blocks,
				"bytes", body.n.Load())
		}
	}})
	if err != nil && ctx.Err() != nil {
		err = fmt.Errorf("%w (%w)", err, context.Cause(ctx))
	}
	return st, body.n.Load(), err
}

// wireReader counts the bytes of a dump's body and keeps pushing back its
// stall deadline while they flow.
type wireReader struct {
	r     io.Reader
	n     atomic.Int64
	stall *time.Timer
	every time.Duration
}

func (w *wireReader) Read(p []byte) (int, error) {
	n, err := w.r.Read(p)
	if n > 0 {
		w.n.Add(int64(n))
		w.stall.Reset(w.every)
	}
	return n, err
}
