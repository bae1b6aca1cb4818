package jepsen

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The scenarios: TestSmoke runs the CI subset in make test; TestJepsen
// runs every nemesis (make jepsen) when JEPSEN_ALL=1, for JEPSEN_TIME
// each (default 60s), keeping every run's files under JEPSEN_OUT
// (default: a temporary directory, kept on failure).

func runScenario(t *testing.T, n Nemesis, d time.Duration, root string) RunSummary {
	t.Helper()
	dir := RunDir(root, n.Name())
	ctx, cancel := context.WithTimeout(context.Background(), d+5*time.Minute)
	defer cancel()
	sum, err := Run(ctx, RunConfig{Bin: binDir, Dir: dir, Nemesis: n, Duration: d})
	if err != nil {
		t.Errorf("%s: %v (files in %s)", n.Name(), err, dir)
		return sum
	}
	if f := sum.Failures(); len(f) > 0 {
		t.Errorf("%s failed (files in %s): %s; problems: %s", n.Name(), dir, strings.Join(f, "; "), strings.Join(sum.Problems, "; "))
	}
	return sum
}

// outDir is JEPSEN_OUT, or a temporary directory that outlives a failed
// test for the post-mortem.
func outDir(t *testing.T) string {
	if d := os.Getenv("JEPSEN_OUT"); d != "" {
		abs, err := filepath.Abs(d)
		if err != nil {
			t.Fatal(err)
		}
		return abs
	}
	d, err := os.MkdirTemp("", "kvselect-jepsen-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if !t.Failed() {
			os.RemoveAll(d)
		}
	})
	return d
}

// CISubset are the nemeses make test runs on every change (SPEC §13),
// each for CITime, checked like every scenario.
var CISubset = []string{"kill-leader", "partition-isolate-leader", "worker-link-cut"}

// CITime is how long each scenario of the CI subset runs.
const CITime = 20 * time.Second

// TestSmoke is make test's jepsen subset: CISubset, CITime each, with
// authentication on, leases, thresholds and a membership change, under
// the full verdict.
func TestSmoke(t *testing.T) {
	nemeses, err := SelectNemeses(strings.Join(CISubset, ","))
	if err != nil {
		t.Fatal(err)
	}
	root := outDir(t)
	var runs []RunSummary
	for _, n := range nemeses {
		runs = append(runs, runScenario(t, n, CITime, root))
	}
	var b strings.Builder
	PrintTable(&b, runs)
	t.Log("\n" + b.String())
}

// TestJepsen runs every nemesis (JEPSEN_NEMESIS=a,b: only those) and
// prints the table.
func TestJepsen(t *testing.T) {
	if os.Getenv("JEPSEN_ALL") == "" {
		t.Skip("make jepsen runs it (JEPSEN_ALL=1)")
	}
	d := 60 * time.Second
	if v := os.Getenv("JEPSEN_TIME"); v != "" {
		var err error
		if d, err = time.ParseDuration(v); err != nil || d <= 0 {
			t.Fatalf("JEPSEN_TIME=%q: want a positive duration such as 60s or 2m (%v)", v, err)
		}
	}
	nemeses, err := SelectNemeses(os.Getenv("JEPSEN_NEMESIS"))
	if err != nil {
		t.Fatalf("JEPSEN_NEMESIS: %v", err)
	}
	root := outDir(t)
	var runs []RunSummary
	for _, n := range nemeses {
		runs = append(runs, runScenario(t, n, d, root))
	}
	PrintTable(os.Stdout, runs)
	t.Logf("files in %s", root)
}
