package cluster

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/kvselect/kvselect/fsm"
)

// Test_SkippableUnknownEntry: a log entry written by a newer binary, of a
// type this one does not know but flagged IgnoreUnknown, neither stops a
// node nor stalls it. On every member of a three-node cluster the entry is
// skipped and counted (metric and warning), the catalog index moves past
// it so waiters on it are released, and later writes apply as usual.
func Test_SkippableUnknownEntry(t *testing.T) {
	nodes, warnings := openCluster(t, 3)
	// 0x7f is no command type of this binary; the payload is one only the
	// newer binary understands.
	data := append([]byte{byte(fsm.IgnoreUnknown | 0x7f)}, `{"worker_id":7,"busy_threshold":0.9}`...)
	f := applyRaw(t, nodes, data)
	idx := f.Index()
	if res, ok := f.Response().(*fsm.Result); !ok || !res.Skipped || res.Err != nil || res.Index != idx {
		t.Fatalf("leader's FSM answered %+v for the skippable entry at %d", f.Response(), idx)
	}
	for i, n := range nodes {
		if err := n.WaitApplied(ctx(t), idx); err != nil {
			t.Fatalf("%s: waiter on the skipped entry not released: %v", n.ID(), err)
		}
		if got := n.CatalogIndex(); got < idx {
			t.Fatalf("%s: catalog index %d, want at least %d", n.ID(), got, idx)
		}
		if n.Catalog().Len() != 0 {
			t.Fatalf("%s: the skipped entry changed the catalog", n.ID())
		}
		if got := skippedMetric(t, n); got != 1 {
			t.Fatalf("%s: kvselect_raft_skipped_entries_total = %v, want 1", n.ID(), got)
		}
		if got := warnings[i].Load(); got != 1 {
			t.Fatalf("%s: %d skipped-entry warnings, want 1", n.ID(), got)
		}
	}

	res, err := waitLeader(t, nodes).Apply(ctx(t), fsm.UpsertWorker{Worker: worker(7)})
	if err != nil {
		t.Fatal(err)
	}
	if res.Index <= idx || res.Skipped {
		t.Fatalf("write after the skipped entry: %+v", res)
	}
	for _, n := range nodes {
		if err := n.WaitApplied(ctx(t), res.Index); err != nil {
			t.Fatalf("%s: %v", n.ID(), err)
		}
		if w, ok := n.Catalog().Worker(7); !ok || !w.Schedulable() {
			t.Fatalf("%s: worker 7 after the skipped entry: %+v", n.ID(), w)
		}
		if got := skippedMetric(t, n); got != 1 {
			t.Fatalf("%s: kvselect_raft_skipped_entries_total = %v after a known write, want 1", n.ID(), got)
		}
	}
}

// openCluster starts size nodes on loopback that bootstrap one cluster,
// each logging through a handler that counts its skipped-entry warnings.
func openCluster(t *testing.T, size int) ([]*Node, []*atomic.Int64) {
	t.Helper()
	peers, lns := bindPeers(t, size)
	var nodes []*Node
	var warnings []*atomic.Int64
	for i, p := range peers {
		cfg := TestConfig(p.ID, t.TempDir())
		cfg.RaftListener, cfg.RaftAdvertise, cfg.InitialCluster = lns[i], p.RaftAddr, peers
		var w atomic.Int64
		cfg.Logger = slog.New(skipWarnings{&w})
		n, err := Open(cfg, nil)
		if err != nil {
			for _, ln := range lns[i:] {
				ln.Close()
			}
			t.Fatal(err)
		}
		t.Cleanup(func() { n.Close() })
		nodes, warnings = append(nodes, n), append(warnings, &w)
	}
	return nodes, warnings
}

// applyRaw appends data to the log through the leader's raft directly, as
// a newer binary's leader would, and waits until the leader has applied it.
// A leader change before the entry reached the log (nothing written) is
// retried on the new leader.
func applyRaw(t *testing.T, nodes []*Node, data []byte) raft.ApplyFuture {
	t.Helper()
	wait := ctx(t)
	for {
		f := waitLeader(t, nodes).raft.Apply(data, 5*time.Second)
		err := f.Error()
		switch {
		case err == nil:
			return f
		case !errors.Is(err, raft.ErrNotLeader) || wait.Err() != nil:
			t.Fatalf("raw apply: %v", err)
		}
	}
}

// skippedMetric reads kvselect_raft_skipped_entries_total from the node's
// collectors, as a scrape would.
func skippedMetric(t *testing.T, n *Node) float64 {
	t.Helper()
	reg := prometheus.NewRegistry()
	reg.MustRegister(n.Collectors()...)
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range families {
		if mf.GetName() == "kvselect_raft_skipped_entries_total" && len(mf.GetMetric()) == 1 {
			return mf.GetMetric()[0].GetCounter().GetValue()
		}
	}
	t.Fatal("kvselect_raft_skipped_entries_total not exported")
	return 0
}

// skipWarnings is a log handler that counts the watcher's warnings about
// skipped entries and drops everything else.
type skipWarnings struct{ n *atomic.Int64 }

func (h skipWarnings) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelWarn }
func (h skipWarnings) WithAttrs([]slog.Attr) slog.Handler           { return h }
func (h skipWarnings) WithGroup(string) slog.Handler                { return h }

func (h skipWarnings) Handle(_ context.Context, r slog.Record) error {
	if strings.HasPrefix(r.Message, "skipped log entries") {
		h.n.Add(1)
	}
	return nil
}
