package jepsen

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

func sel(node int, result string, call, ret int) Op {
	return Op{Client: SelectionClientBase + node, Node: node, Kind: KindSelectAndReserve,
		Call: time.Duration(call) * ms, Return: time.Duration(ret) * ms, Result: result}
}

func Test_MaxUnavailability(t *testing.T) {
	ops := []Op{
		sel(0, ResultOK, 0, 5), sel(0, ResultFail, 10, 15), sel(0, ResultFail, 20, 25), sel(0, ResultOK, 40, 45),
		sel(0, ResultFail, 50, 55), sel(0, ResultOK, 60, 65),
		sel(1, ResultOK, 0, 5), sel(1, ResultUnknown, 10, 15),
		sel(2, ResultFail, 100, 110), sel(2, ResultFail, 120, 170),
	}
	for _, tc := range []struct {
		name    string
		windows []Window
		want    []time.Duration
	}{
		{"no windows", nil, []time.Duration{30 * ms, 0, 70 * ms}},
		// Node 2 was killed from 90 to 130 ms: its failure called at 100
		// is its own downtime; the one at 120 too; nothing is left.
		{"node 2 down", []Window{{Start: 90 * ms, End: 130 * ms, Down: []int{2}}}, []time.Duration{30 * ms, 0, 0}},
		// A window taking node 1 down leaves node 0's failures counted.
		{"other node down", []Window{{Start: 0, End: 100 * ms, Down: []int{1}}}, []time.Duration{30 * ms, 0, 70 * ms}},
		// Node 0 down from 16 to 30 ms: the failure over 10-15 ms came
		// before it and still opens the stretch, the one at 20 is
		// skipped, the OK at 40 ends it.
		{"partly down", []Window{{Start: 16 * ms, End: 30 * ms, Down: []int{0}}}, []time.Duration{30 * ms, 0, 70 * ms}},
		// Node 0 killed at 12 ms, while it served the selection called at
		// 10: that failure is the kill's too. What is left is 50-60 ms.
		{"killed in flight", []Window{{Start: 12 * ms, End: 30 * ms, Down: []int{0}}}, []time.Duration{10 * ms, 0, 70 * ms}},
		// A window with no node down changes nothing.
		{"partition", []Window{{Start: 0, End: 200 * ms}}, []time.Duration{30 * ms, 0, 70 * ms}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := MaxUnavailability(ops, 3, tc.windows)
			for i := range tc.want {
				if got[i] != tc.want[i] {
					t.Fatalf("node %d: %v, want %v (all %v)", i, got[i], tc.want[i], got)
				}
			}
		})
	}
}

// passing is the summary of a 20 s run every check of which held.
func passing() RunSummary {
	return RunSummary{Nemesis: "kill-leader", Duration: 20 * time.Second, OpsOK: 500, OpsFail: 20, OpsUnknown: 10,
		Linearizable: VerdictYes, LostWritesChecked: true, CatalogConverged: VerdictYes, IndexConverged: VerdictYes,
		LoadsZero: VerdictYes, LeasesLapsed: VerdictYes, SelectOK: 300, SelectBusy: 40, SelectFail: 12, SelectFailLive: 1,
		SelectOKPerNode: []int{100, 100, 100}, MaxUnavailable: []time.Duration{0, 200 * ms, 0},
		UnavailableBound: SelectionGapBound("kill-leader"), ThresholdWritesOK: 6, BusyProbes: 2, LeaseRenewalsOK: 40,
		LeaseLapses: 4, MemberChanges: 1}
}

// Test_Failures feeds the verdict summaries each wrong in one way: every
// one must fail, saying why.
func Test_Failures(t *testing.T) {
	if f := passing().Failures(); len(f) > 0 || !passing().Passed() {
		t.Fatalf("a passing run fails: %v", f)
	}
	for _, tc := range []struct {
		name   string
		change func(*RunSummary)
		want   string
	}{
		{"not linearizable", func(s *RunSummary) { s.Linearizable = VerdictNo }, "linearizable: no"},
		{"linearizability inconclusive", func(s *RunSummary) { s.Linearizable = VerdictInconclusive }, "linearizable: inconclusive"},
		{"linearizability not checked", func(s *RunSummary) { s.Linearizable = VerdictNotChecked }, "linearizable: -"},
		{"lost writes not checked", func(s *RunSummary) { s.LostWritesChecked = false }, "lost writes not checked"},
		{"a lost write", func(s *RunSummary) { s.LostWrites = 1 }, "1 acknowledged writes lost"},
		{"catalog diverged", func(s *RunSummary) { s.CatalogConverged = VerdictNo }, "catalog converged: no"},
		{"index not checked", func(s *RunSummary) { s.IndexConverged = VerdictNotChecked }, "index converged: -"},
		{"loads stayed", func(s *RunSummary) { s.LoadsZero = VerdictNo }, "loads zero: no"},
		{"loads not checked", func(s *RunSummary) { s.LoadsZero = VerdictNotChecked }, "loads zero: -"},
		{"a lease outlived the run", func(s *RunSummary) { s.LeasesLapsed = VerdictNo }, "leases lapsed: no"},
		{"a live node unavailable past the bound", func(s *RunSummary) { s.MaxUnavailable[1] = s.UnavailableBound + ms }, "n2 went 1.001s"},
		{"a nemesis without a bound", func(s *RunSummary) { s.UnavailableBound = 0 }, "no selection availability bound"},
		{"too many live failures", func(s *RunSummary) { s.SelectFailLive = 4 }, "4 of 344 selections failed"},
		{"an unexplained busy answer", func(s *RunSummary) { s.BusyUnexplained = 1 }, "1 busy answers"},
		{"a probe booked past a tight threshold", func(s *RunSummary) { s.BusyProbeFailures = 1 }, "1 busy probes booked"},
		{"a lease lost early", func(s *RunSummary) { s.LeaseViolations = 1 }, "1 leases lost"},
		{"too few catalog ops", func(s *RunSummary) { s.OpsOK = 39 }, "39 acknowledged catalog ops in 20s, want at least 40"},
		{"a node that never selected", func(s *RunSummary) { s.SelectOKPerNode[2] = 0 }, "0 successful selections on n3"},
		{"no per-node count", func(s *RunSummary) { s.SelectOKPerNode = nil }, "no selections counted per node"},
		{"no threshold writes", func(s *RunSummary) { s.ThresholdWritesOK = 1 }, "1 acknowledged threshold writes"},
		{"no busy probe", func(s *RunSummary) { s.BusyProbes = 0 }, "0 judged busy probes"},
		{"no renewals", func(s *RunSummary) { s.LeaseRenewalsOK = 0 }, "0 acknowledged lease renewals"},
		{"no lapse", func(s *RunSummary) { s.LeaseLapses = 0 }, "0 leases seen to lapse"},
		{"no membership change", func(s *RunSummary) { s.MemberChanges = 0 }, "0 membership changes"},
		{"a problem", func(s *RunSummary) { s.Problems = []string{"recover: no leader"} }, "1 problems"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := passing()
			s.MaxUnavailable = slices.Clone(s.MaxUnavailable)
			s.SelectOKPerNode = slices.Clone(s.SelectOKPerNode)
			tc.change(&s)
			f := s.Failures()
			if s.Passed() || !strings.Contains(strings.Join(f, "\n"), tc.want) {
				t.Fatalf("failures %q, want one with %q", f, tc.want)
			}
		})
	}
}

// Test_Verdict_RejectsUnavailableIdleRun is issue 21's history: a live
// node failed every selection for 49 s and no catalog op succeeded,
// while every convergence check held. It must fail, for both reasons.
func Test_Verdict_RejectsUnavailableIdleRun(t *testing.T) {
	var ops []Op
	for k := range 490 {
		call := k * 100
		ops = append(ops, sel(0, ResultOK, call, call+5), sel(1, ResultFail, call, call+50), sel(2, ResultOK, call, call+5))
	}
	ops = append(ops, op(0, KindRegister, "a", 0, 2000, ResultFail), op(1, KindGet, "", 0, 2000, ResultFail))
	// The nemesis killed n1, not n2: n2's failures are the cluster's.
	s := Summarize("kill-leader", ops, 3, []Window{{Name: "kill-leader", Start: 10 * time.Second, End: 15 * time.Second, Down: []int{0}}})
	s.Duration = 49 * time.Second
	s.SetCatalogCheck(CatalogCheck{Verdict: VerdictYes})
	s.SetLostWrites(nil)
	s.CatalogConverged, s.IndexConverged, s.LoadsZero, s.LeasesLapsed = VerdictYes, VerdictYes, VerdictYes, VerdictYes
	s.ThresholdWritesOK, s.BusyProbes, s.LeaseRenewalsOK, s.LeaseLapses, s.MemberChanges = 9, 9, 9, 9, 9
	if s.MaxUnavailable[1] < 48*time.Second || s.SelectFail != 490 || s.SelectFailLive != 490 {
		t.Fatalf("summary %+v", s)
	}
	f := strings.Join(s.Failures(), "\n")
	for _, want := range []string{"n2 went 48.95s without a successful selection (bound 1s)", "0 acknowledged catalog ops in 49s",
		"490 of 1470 selections failed", "0 successful selections on n2"} {
		if !strings.Contains(f, want) {
			t.Errorf("failures lack %q:\n%s", want, f)
		}
	}
}

// Test_Summarize_BusyAndDown: busy answers are answers, not failures, and
// failures of a node the nemesis took down count against it only in its
// window.
func Test_Summarize_BusyAndDown(t *testing.T) {
	busy := sel(0, ResultOK, 20, 25)
	busy.Busy = true
	ops := []Op{sel(0, ResultOK, 0, 5), sel(0, ResultFail, 10, 15), busy, sel(0, ResultOK, 30, 35),
		sel(1, ResultFail, 10, 15), sel(1, ResultOK, 40, 45)}
	s := Summarize("kill-random", ops, 2, []Window{{Start: 0, End: 20 * ms, Down: []int{1}}})
	if s.SelectOK != 3 || s.SelectBusy != 1 || s.SelectFail != 2 || s.SelectFailLive != 1 || !slices.Equal(s.SelectOKPerNode, []int{2, 1}) {
		t.Fatalf("counts %+v", s)
	}
	// The busy answer at 20 ms ended n1's stretch; it is unexplained (no
	// tight threshold was ever set).
	if s.MaxUnavailable[0] != 10*ms || s.MaxUnavailable[1] != 0 || s.BusyUnexplained != 1 {
		t.Fatalf("unavailable %v, unexplained busy %d", s.MaxUnavailable, s.BusyUnexplained)
	}
}

func Test_Summarize_PrintTable(t *testing.T) {
	ops := []Op{
		op(0, KindRegister, "a", 0, 10, ResultOK), op(1, KindRegister, "b", 0, 10, ResultFail),
		op(2, KindPatch, "c", 0, 10, ResultUnknown), sel(0, ResultOK, 0, 5), sel(1, ResultFail, 0, 5),
	}
	s := Summarize("kill-leader", ops, 2, nil)
	if s.OpsOK != 1 || s.OpsFail != 1 || s.OpsUnknown != 1 || s.SelectOK != 1 || s.SelectFail != 1 || s.UnavailableBound != time.Second {
		t.Fatalf("counts %+v", s)
	}
	if s.Passed() {
		t.Fatal("a run whose checks did not run passed")
	}
	good := passing()
	bad := good
	bad.Nemesis, bad.Linearizable = "partition-halves", VerdictInconclusive
	var buf bytes.Buffer
	PrintTable(&buf, []RunSummary{good, bad})
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 3 || !strings.Contains(lines[0], "linearizable") ||
		!strings.HasSuffix(lines[1], "PASS") || !strings.Contains(lines[1], "n2=200ms") || !strings.Contains(lines[1], "(1s)") ||
		!strings.Contains(lines[2], "inconclusive") || !strings.HasSuffix(lines[2], "FAIL") {
		t.Fatalf("table:\n%s", buf.String())
	}
}

func Test_WriteRun(t *testing.T) {
	dir := t.TempDir()
	ops := withBodies([]Op{op(0, KindRegister, "a", 0, 10, ResultOK), read(1, "a", 20, 30), sel(0, ResultOK, 0, 5)})
	check := CheckCatalogLinearizable(ops, 10*time.Second)
	type event struct {
		Name string        `json:"name"`
		At   time.Duration `json:"at"`
	}
	events := []event{{"inject", 5 * ms}, {"heal", 25 * ms}}
	sum := Summarize("kill-leader", ops, 1, nil)
	sum.SetCatalogCheck(check)
	if err := WriteRun(dir, ops, events, []Window{{Name: "kill-leader", Start: 5 * ms, End: 25 * ms}}, &check, sum); err != nil {
		t.Fatal(err)
	}
	back, err := ReadHistoryFile(filepath.Join(dir, HistoryFile))
	if err != nil || len(back) != len(ops) || back[1] != ops[1] {
		t.Fatalf("history read back %+v, %v", back, err)
	}
	nem, _ := os.ReadFile(filepath.Join(dir, NemesisFile))
	if got := strings.Count(string(nem), "\n"); got != 2 || !strings.Contains(string(nem), `"name":"heal"`) {
		t.Fatalf("nemesis.jsonl:\n%s", nem)
	}
	html, _ := os.ReadFile(filepath.Join(dir, HTMLFile))
	if !bytes.Contains(html, []byte("kill-leader")) {
		t.Fatal("history.html lacks the nemesis window")
	}
	var back2 RunSummary
	b, _ := os.ReadFile(filepath.Join(dir, SummaryFile))
	if err := json.Unmarshal(b, &back2); err != nil || back2.Linearizable != VerdictYes || back2.Nemesis != "kill-leader" {
		t.Fatalf("summary.json %s: %v", b, err)
	}
	if err := WriteJSONLines(&bytes.Buffer{}, 42); err == nil {
		t.Fatal("a non-slice was accepted as events")
	}
}
