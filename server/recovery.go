package server

import (
	"cmp"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"slices"
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
// meanwhile, /ready says recovering, and every wait is bounded.
//
// When to give up is decided in rounds (recoveryrules.go): each round
// asks every member (or --indexer-peers URL) once and sorts the answers
// into reached-and-serving, reached-but-recovering-or-empty, and not
// reached. A node keeps asking while anyone serves: a member whose dump
// did not load (cut short, a 5xx, a catalog not yet applied here), or the
// leader itself while this node has not yet received its log (a restarted
// follower learns the members' addresses and the dump's partitions from
// that log, and hashicorp/raft may take up to ten seconds to send it to a
// follower that was away). It starts empty with one INFO line as soon as
// every member it reached is itself recovering or empty (a whole-cluster
// restart must not deadlock), and with a WARN when nobody answered at all
// for MembersWait or members kept serving broken dumps for ServingWait.

// RecoveryConfig tunes the startup recovery of the KV index. Zero values
// take DefaultRecoveryConfig's.
type RecoveryConfig struct {
	// Peers are the HTTP base URLs asked for /dump, in order
	// (--indexer-peers). When empty, the other members of the cluster are
	// asked, at their published HTTP addresses; a node alone in its
	// cluster skips recovery.
	Peers []string
	// MembersWait bounds how long recovery keeps asking while it reaches
	// no one at all (every peer refuses the connection or times out, and
	// no leader has told this node where the members are), counted from
	// the start or from the last round that reached anyone. Past it the
	// node starts empty, with a warning. Default 10 s.
	MembersWait time.Duration
	// ServingWait bounds the whole recovery while someone serves: a peer
	// that answers but whose dump does not load, or a leader whose log
	// has not reached this node yet. Past it the node starts empty, with
	// a warning. Default 2 min.
	ServingWait time.Duration
	// CatalogWait bounds waiting to apply the catalog index a peer's dump
	// was taken at while no leader is known; past it the dump loads
	// anyway, and ranks this node does not know yet replay from the
	// start. While a leader is known the wait goes on (its log is on the
	// way), up to ServingWait from the start of the recovery. Default
	// 10 s.
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

// DefaultRecoveryConfig returns every default of RecoveryConfig: a zero
// field takes its value from here.
func DefaultRecoveryConfig() RecoveryConfig {
	return RecoveryConfig{
		MembersWait: 10 * time.Second, ServingWait: 2 * time.Minute, CatalogWait: 10 * time.Second,
		HeaderTimeout: 10 * time.Second, StallTimeout: 10 * time.Second, DumpTimeout: 5 * time.Minute,
	}
}

// withDefaults fills c's zero timings from DefaultRecoveryConfig.
func (c RecoveryConfig) withDefaults() RecoveryConfig {
	d := DefaultRecoveryConfig()
	c.MembersWait = cmp.Or(c.MembersWait, d.MembersWait)
	c.ServingWait = cmp.Or(c.ServingWait, d.ServingWait)
	c.CatalogWait = cmp.Or(c.CatalogWait, d.CatalogWait)
	c.HeaderTimeout = cmp.Or(c.HeaderTimeout, d.HeaderTimeout)
	c.StallTimeout = cmp.Or(c.StallTimeout, d.StallTimeout)
	c.DumpTimeout = cmp.Or(c.DumpTimeout, d.DumpTimeout)
	return c
}

// Validate refuses negative timings and peers that are not http(s) URLs
// (ErrBadPeer); a zero timing is its default.
func (c RecoveryConfig) Validate() error {
	var errs []error
	for _, f := range []struct {
		name string
		v    time.Duration
	}{
		{"MembersWait", c.MembersWait}, {"ServingWait", c.ServingWait}, {"CatalogWait", c.CatalogWait},
		{"HeaderTimeout", c.HeaderTimeout}, {"StallTimeout", c.StallTimeout}, {"DumpTimeout", c.DumpTimeout},
	} {
		if f.v < 0 {
			errs = append(errs, fmt.Errorf("%w: Recovery.%s must not be negative, got %s", ErrInvalidConfig, f.name, f.v))
		}
	}
	for _, u := range c.Peers {
		if err := checkPeerURL(u); err != nil {
			errs = append(errs, fmt.Errorf("%w: Recovery.Peers (--indexer-peers): %w", ErrInvalidConfig, err))
		}
	}
	return errors.Join(errs...)
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
		if err := checkPeerURL(u); err != nil {
			return nil, err
		}
		out = append(out, strings.TrimRight(u, "/"))
	}
	return out, nil
}

// checkPeerURL refuses an --indexer-peers entry that is not an http(s)
// URL.
func checkPeerURL(u string) error {
	if !strings.HasPrefix(u, "http://") && !strings.HasPrefix(u, "https://") {
		return fmt.Errorf("%w: %q is not an http(s) URL", ErrBadPeer, u)
	}
	return nil
}

// ErrBadPeer: an --indexer-peers entry that is not an HTTP URL.
var ErrBadPeer = errors.New("invalid indexer peer")

var (
	// errPeerAnswer: a peer answered /dump with a server error status
	// (5xx) other than "recovering", or a bad header: it may do better
	// next time.
	errPeerAnswer = errors.New("peer failed to serve the dump")
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
	start  time.Time // the recovery's; MembersWait and ServingWait run from it
}

// startRecovery runs the recovery in its own goroutine, which the node's
// shutdown stops (s.stop) and waits for (s.wg).
func (s *Server) startRecovery() {
	ctx, cancel := s.untilStop()
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		defer cancel()
		s.recoverIndex(ctx)
	}()
}

// untilStop returns a context that ends when the node stops (s.stop) or
// cancel is called, for the node's own loops and the calls they make. Its
// watcher goroutine ends with it, so cancel must be called.
func (s *Server) untilStop() (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		select {
		case <-s.stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	return ctx, cancel
}

// recoverIndex runs the recovery, then releases the listeners and clears
// the recovering flag, whatever happened.
func (s *Server) recoverIndex(ctx context.Context) {
	cfg := s.cfg.Recovery // Start filled its defaults
	tr := http.DefaultTransport.(*http.Transport).Clone()
	// gzip is asked for and undone here, so the log can tell the bytes on
	// the wire.
	tr.DisableCompression = true
	tr.ResponseHeaderTimeout = cfg.HeaderTimeout
	if s.peerTLS != nil {
		tr.TLSClientConfig = s.peerTLS.Clone() // the transport's HTTP/2 setup writes into it
	}
	r := &recovery{cfg: cfg, node: s.Node, ix: s.Indexer, auth: s.auth, scheme: s.scheme,
		log: s.log.With("component", "recovery"), hc: &http.Client{Transport: tr}, start: time.Now()}
	defer func() {
		tr.CloseIdleConnections()
		s.Ingest.Release()
		s.recovering.Store(false)
		r.log.Info("index recovery over; kv event listeners started", "duration", time.Since(r.start).Round(time.Millisecond))
	}()
	r.run(ctx)
}

// run asks the peers in rounds until a dump loads or decide ends it.
func (r *recovery) run(ctx context.Context) {
	explicit := len(r.cfg.Peers) > 0
	if !explicit {
		if members, err := r.node.OtherMembers(); err != nil || len(members) == 0 {
			r.log.Info("no other cluster member: nothing to recover")
			return
		}
	}
	last := map[string]peerState{} // each peer's state in the previous round, to log changes only
	wait := recoveryRetryMin
	contact := r.start // the last round that reached anyone
	for {
		leaderCh, catalogCh := r.node.Changes()
		states := r.round(ctx, explicit, last)
		if ctx.Err() != nil {
			return
		}
		if reached(states) {
			contact = time.Now()
		}
		v := decide(states, time.Since(r.start), time.Since(contact), r.cfg)
		switch v {
		case verdictLoaded:
			return
		case verdictStartEmpty:
			r.log.Info("every peer reached is recovering too or has an empty index; starting with an empty index",
				"peers", summarize(last))
			return
		case verdictNobodyReached:
			r.log.Warn("no peer answered in time; starting with an empty index",
				"peers", summarize(last), "silent_for", r.cfg.MembersWait)
			return
		case verdictServingTimeout:
			r.log.Warn("peers answered but no dump loaded in time; starting with an empty index",
				"peers", summarize(last), "waited", r.cfg.ServingWait)
			return
		}
		timer := time.NewTimer(wait)
		select {
		case <-leaderCh:
		case <-catalogCh:
		case <-timer.C:
		case <-ctx.Done():
			timer.Stop()
			return
		}
		timer.Stop()
		wait = min(2*wait, recoveryRetryMax)
	}
}

// The pause between rounds doubles from recoveryRetryMin to
// recoveryRetryMax; a leader or catalog change ends it early (the log
// that names the members has come).
const (
	recoveryRetryMin = 100 * time.Millisecond
	recoveryRetryMax = 2 * time.Second
)

// round asks every peer once (stopping at the first dump that loads with
// events) and returns their states; last is updated, and a peer's state
// is logged when it changed since the previous round.
func (r *recovery) round(ctx context.Context, explicit bool, last map[string]peerState) []peerState {
	var states []peerState
	note := func(name string, st peerState, err error) {
		states = append(states, st)
		prev, seen := last[name]
		last[name] = st
		if seen && prev == st {
			return
		}
		log := r.log.With("peer", name, "state", st.String())
		switch {
		case errors.Is(err, errLeaderLogPending):
			log.Info("index recovery: waiting for the leader's log to name this peer's address")
		case st == peerServing || errors.Is(err, errPeerRefused):
			log.Warn("index recovery from this peer failed; asking again later", "err", err)
		case err != nil:
			// The line that ends the recovery lists every peer's state.
			log.Debug("index recovery: peer has no dump to give", "err", err)
		default:
			log.Debug("index recovery: peer state")
		}
	}
	if explicit {
		for _, u := range r.cfg.Peers {
			st, err := r.try(ctx, u)
			if ctx.Err() != nil {
				return nil
			}
			note(u, st, err)
			if st == peerLoaded {
				return states
			}
		}
		return states
	}
	st := r.node.Status()
	pending := leaderLogPending(st.Leader.ID, st.CommitIndex, st.AppliedIndex)
	members, _ := r.node.OtherMembers()
	for _, m := range members {
		if m.HTTPAddr == "" {
			// Its address comes with the leader's log: someone may serve
			// there, if that log is on its way.
			ps, err := peerUnreachable, error(fmt.Errorf("%w: HTTP address not known yet", errPeerUnreachable))
			if pending {
				ps, err = peerServing, errLeaderLogPending
			}
			note(m.ID, ps, err)
			continue
		}
		ps, err := r.try(ctx, client.BaseURLWithScheme(r.scheme, m.HTTPAddr))
		if ctx.Err() != nil {
			return nil
		}
		note(m.ID, ps, err)
		if ps == peerLoaded {
			return states
		}
	}
	if pending {
		// Addresses this node knows may be stale, and dumps' partitions
		// unknown here, until the leader's log has arrived.
		states = append(states, peerServing)
	}
	return states
}

// summarize renders each peer's last state for the log line that ends a
// recovery.
func summarize(last map[string]peerState) string {
	names := make([]string, 0, len(last))
	for name := range last {
		names = append(names, name)
	}
	slices.Sort(names)
	var b strings.Builder
	for i, name := range names {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%s=%s", name, last[name])
	}
	return b.String()
}

// try loads one peer's dump and reports the peer's state: peerLoaded
// (events loaded), peerEmpty (a dump without events loaded: the index
// holds that dump's watermarks, and a later dump may still load over
// it), or the state of the failure, which leaves the index as it was
// (LoadDump clears what it applied).
func (r *recovery) try(ctx context.Context, base string) (peerState, error) {
	log := r.log.With("peer", base)
	log.Debug("index recovery: fetching the dump")
	start := time.Now()
	st, n, err := r.load(ctx, base, log)
	if err != nil {
		if ctx.Err() == nil && n > 0 {
			log.Warn("dump from this peer broke off", "err", err,
				"partitions", st.Partitions, "events", st.Events, "bytes", n)
		}
		return classifyFailure(err), err
	}
	if st.Events == 0 && (st.Skipped > 0 || st.SkippedPartitions > 0) {
		// Not an empty index: one this node cannot place yet (its
		// catalog lacks the partitions or ranks). Ask again.
		return peerServing, fmt.Errorf("%w: %d events, %d partitions of the dump unknown here", errNothingPlaced,
			st.Skipped, st.SkippedPartitions)
	}
	if st.Events == 0 {
		return peerEmpty, nil
	}
	log.Info("index recovered from peer", "partitions", st.Partitions, "events", st.Events, "blocks", st.Blocks,
		"watermarks", st.Watermarks, "skipped_events", st.Skipped, "skipped_partitions", st.SkippedPartitions,
		"bytes", n, "duration", time.Since(start).Round(time.Millisecond))
	return peerLoaded, nil
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
		return st, 0, fmt.Errorf("%w: request dump: %w", errPeerUnreachable, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		var e api.Error
		_ = json.NewDecoder(io.LimitReader(resp.Body, 4096)).Decode(&e)
		why := errPeerAnswer
		switch {
		case resp.StatusCode == http.StatusServiceUnavailable && e.Code == api.CodeNotReady:
			// GET /dump's only not_ready: the peer recovers its own
			// index (and so answers every kvselect since recovery
			// existed).
			why = errPeerRecovering
		case resp.StatusCode >= 400 && resp.StatusCode < 500:
			why = errPeerRefused
		}
		return st, 0, fmt.Errorf("%w: %s: %s %s", why, resp.Status, e.Code, e.Message)
	}
	if h := resp.Header.Get(api.HeaderIndex); h != "" {
		// Dynamo's indexer sends none; then the local catalog is taken as
		// it is.
		idx, err := strconv.ParseUint(h, 10, 64)
		if err != nil {
			return st, 0, fmt.Errorf("%w: %s %q", errPeerAnswer, api.HeaderIndex, h)
		}
		err = r.waitCatalog(ctx, idx, log)
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

// waitCatalog waits to have applied catalog index idx: CatalogWait at a
// time, again and again while a leader is known (its log is on its way;
// hashicorp/raft may hold it back up to ten seconds toward a follower
// that was away), up to ServingWait from the start of the recovery.
func (r *recovery) waitCatalog(ctx context.Context, idx uint64, log *slog.Logger) error {
	for {
		wctx, cancel := context.WithTimeout(ctx, r.cfg.CatalogWait)
		err := r.node.WaitApplied(wctx, idx)
		cancel()
		if err == nil || errors.Is(err, cluster.ErrClosed) || ctx.Err() != nil {
			return err
		}
		if r.node.Status().Leader.ID == "" || time.Since(r.start) >= r.cfg.ServingWait {
			return err
		}
		log.Info("waiting for the leader's log to reach the dump's catalog index", "catalog_index", idx,
			"applied", r.node.CatalogIndex())
	}
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
