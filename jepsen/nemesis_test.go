package jepsen

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

func Test_NemesisNames(t *testing.T) {
	want := []string{"kill-leader", "kill-random", "pause-leader", "partition-isolate-leader",
		"partition-halves", "partition-bridge", "partition-one-way", "latency", "flaky",
		"snapshot-catch-up", "leader-transfer", "restart-all", "worker-link-cut", "member-remove-rejoin",
		"restart-after-60s"}
	var got []string
	for _, n := range Nemeses() {
		got = append(got, n.Name())
		m, ok := NemesisByName(n.Name())
		if !ok || m.Name() != n.Name() {
			t.Errorf("NemesisByName(%q) = %v, %v", n.Name(), m, ok)
		}
	}
	if !slices.Equal(got, want) {
		t.Fatalf("nemeses %v, want %v", got, want)
	}
	if _, ok := NemesisByName("no-such"); ok {
		t.Fatal("an unknown name was found")
	}
}

// Test_SelectionGapBounds: every nemesis states its bound, and only the
// nemeses do.
func Test_SelectionGapBounds(t *testing.T) {
	for _, n := range Nemeses() {
		if b := SelectionGapBound(n.Name()); b <= 0 || b >= OpTimeout {
			t.Errorf("%s: bound %v, want one in (0, %v): a timed-out selection must exceed it", n.Name(), b, OpTimeout)
		}
	}
	if len(selectionGaps) != len(Nemeses()) {
		t.Errorf("%d bounds for %d nemeses", len(selectionGaps), len(Nemeses()))
	}
	if SelectionGapBound("no-such") != 0 {
		t.Error("an unknown nemesis has a bound")
	}
}

// Test_SnapshotInstalledSince: the heal's proof that the isolated
// follower installed a snapshot reads only the log written since the
// inject, and refuses a log without the line.
func Test_SnapshotInstalledSince(t *testing.T) {
	path := filepath.Join(t.TempDir(), "n2.log")
	before := "time=... level=INFO msg=\"Installed remote snapshot\"\n" // an earlier cycle's
	if err := os.WriteFile(path, []byte(before), 0o644); err != nil {
		t.Fatal(err)
	}
	from := fileSize(path)
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	f.WriteString("time=... level=INFO msg=\"entering follower state\"\n")
	if err := snapshotInstalledSince(path, from); err == nil || !strings.Contains(err.Error(), "shows no") {
		t.Fatalf("a log with no new install: %v", err)
	}
	f.WriteString(`time=... level=INFO msg="Installed remote snapshot" logger=raft` + "\n")
	if err := snapshotInstalledSince(path, from); err != nil {
		t.Fatalf("a log with the install: %v", err)
	}
	if err := snapshotInstalledSince(filepath.Join(t.TempDir(), "none.log"), 0); err == nil {
		t.Fatal("a missing log proves nothing")
	}
}

func Test_SelectNemeses(t *testing.T) {
	for _, tc := range []struct {
		list string
		want []string
		err  string
	}{
		{"", nil, ""}, // every one
		{"flaky, kill-leader", []string{"kill-leader", "flaky"}, ""},
		{"kill-leader,kill-leader", []string{"kill-leader"}, ""},
		{"kill-leadr", nil, `no nemesis named "kill-leadr"; the nemeses are kill-leader, kill-random,`},
		{"latency,nope,zzz", nil, `no nemesis named "nope", "zzz"`},
	} {
		t.Run(tc.list, func(t *testing.T) {
			got, err := SelectNemeses(tc.list)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err = %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, n := range got {
				names = append(names, n.Name())
			}
			if tc.want == nil {
				if len(names) != len(Nemeses()) {
					t.Fatalf("got %v, want every nemesis", names)
				}
				return
			}
			if !slices.Equal(names, tc.want) {
				t.Fatalf("got %v, want %v", names, tc.want)
			}
		})
	}
}

func Test_LatestSnapshotIndex(t *testing.T) {
	dir := t.TempDir()
	if got := latestSnapshotIndex(dir); got != 0 {
		t.Fatalf("no snapshots: %d", got)
	}
	for _, name := range []string{"2-130-1700000000000", "3-260-1700000000001", "3-900-1700000000002.tmp"} {
		if err := os.MkdirAll(filepath.Join(dir, "snapshots", name), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if got := latestSnapshotIndex(dir); got != 260 {
		t.Fatalf("latest snapshot index %d, want 260 (a .tmp snapshot is unfinished)", got)
	}
}

// Test_NemesesInjectAndHeal applies every nemesis to one cluster in turn
// and checks that each heal leaves it whole: every node live, every link
// passing, a leader agreed, one inject and one heal event recorded.
// JEPSEN_NEMESIS=a,b runs only those.
func Test_NemesesInjectAndHeal(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	nemeses, err := SelectNemeses(os.Getenv("JEPSEN_NEMESIS"))
	if err != nil {
		t.Fatal(err)
	}
	c := mustStartCluster(t, ctx, Config{Workers: 1})
	for _, n := range nemeses {
		if r, ok := n.(*restartAfter); ok {
			r.down = 2 * time.Second // the suite's minute would not fit; the claim is the same
		}
		before := len(c.Events())
		start := time.Now()
		if err := n.Inject(ctx, c); err != nil {
			t.Fatalf("%s inject: %v", n.Name(), err)
		}
		time.Sleep(time.Second) // the fault's duration, not a synchronisation
		if err := n.Heal(ctx, c); err != nil {
			t.Fatalf("%s heal: %v", n.Name(), err)
		}
		if live := c.Live(); len(live) != c.Size() {
			t.Fatalf("%s: live %v after heal", n.Name(), live)
		}
		for _, l := range append(c.AllLinks(), c.AllWorkerLinks()...) {
			if !l.Fault().Passes() {
				t.Fatalf("%s: %s is %v after heal", n.Name(), l.Name, l.Fault())
			}
		}
		// A leader within the bound the run's checker allows after a heal
		// (an election may still follow the heal on a loaded machine).
		lctx, lcancel := context.WithTimeout(ctx, 15*time.Second)
		_, err := c.WaitLeader(lctx, nil)
		lcancel()
		if err != nil {
			t.Fatalf("%s: %v after heal", n.Name(), err)
		}
		ev := c.Events()[before:]
		if len(ev) != 2 || ev[0].Phase != PhaseInject || ev[1].Phase != PhaseHeal || ev[0].Nemesis != n.Name() {
			t.Fatalf("%s: events %+v", n.Name(), ev)
		}
		t.Logf("%-25s %5.1fs  inject: %s; heal: %s", n.Name(), time.Since(start).Seconds(), ev[0].Detail, ev[1].Detail)
	}
}

// Test_RecoveredFromPeer: restart-after-60s's proof reads only the log
// written since the restart, and refuses one where the recovery did not
// end, gave up and started empty, or (when a dump was due) never loaded
// one.
func Test_RecoveredFromPeer(t *testing.T) {
	const (
		loaded  = `time=... level=INFO msg="index recovered from peer" component=recovery peer=http://127.0.0.1:1 events=12` + "\n"
		over    = `time=... level=INFO msg="index recovery over; kv event listeners started" component=recovery` + "\n"
		gaveUp  = `time=... level=WARN msg="no peer answered in time; starting with an empty index" component=recovery` + "\n"
		allIdle = `time=... level=INFO msg="every peer reached is recovering too or has an empty index; starting with an empty index" component=recovery` + "\n"
	)
	for _, tc := range []struct {
		name, before, since string
		wantDump            bool
		err                 string // "" when the proof holds
	}{
		{"recovered", "", loaded + over, true, ""},
		{"an earlier restart's recovery does not count", loaded + over, gaveUp + over, true, "gave up"},
		{"not over yet", "", loaded, true, "no end"},
		{"gave up empty", "", gaveUp + over, true, "gave up"},
		{"gave up empty without workers", "", gaveUp + over, false, "gave up"},
		{"empty when a dump was due", "", allIdle + over, true, "no 'index recovered from peer'"},
		{"empty peers and no workers", "", allIdle + over, false, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "n2.log")
			if err := os.WriteFile(path, []byte(tc.before+tc.since), 0o644); err != nil {
				t.Fatal(err)
			}
			err := recoveredFromPeer(path, int64(len(tc.before)), tc.wantDump)
			switch {
			case tc.err == "" && err != nil:
				t.Fatalf("the proof fails: %v", err)
			case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
				t.Fatalf("err = %v, want one with %q", err, tc.err)
			}
		})
	}
	if err := recoveredFromPeer(filepath.Join(t.TempDir(), "none.log"), 0, false); err == nil {
		t.Fatal("a missing log proves nothing")
	}
}
