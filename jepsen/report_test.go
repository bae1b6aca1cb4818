package jepsen

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
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

func Test_Summarize_PrintTable(t *testing.T) {
	ops := []Op{
		op(0, KindRegister, "a", 0, 10, ResultOK), op(1, KindRegister, "b", 0, 10, ResultFail),
		op(2, KindPatch, "c", 0, 10, ResultUnknown), sel(0, ResultOK, 0, 5), sel(1, ResultFail, 0, 5),
	}
	s := Summarize("kill-leader", ops, 2, nil)
	if s.OpsOK != 1 || s.OpsFail != 1 || s.OpsUnknown != 1 || s.SelectOK != 1 || s.SelectFail != 1 {
		t.Fatalf("counts %+v", s)
	}
	if s.Passed() {
		t.Fatal("a run whose linearizability was not checked passed")
	}
	s.SetCatalogCheck(CatalogCheck{Verdict: VerdictYes, Ops: 2, WorkerIDs: 1})
	s.CatalogConverged = s.Converged(nil)
	s.SetLostWrites(nil)
	if !s.Passed() {
		t.Fatalf("clean run failed: %+v", s)
	}
	bad := s
	bad.Nemesis, bad.Linearizable = "partition-halves", VerdictInconclusive
	var buf bytes.Buffer
	PrintTable(&buf, []RunSummary{s, bad})
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 3 || !strings.Contains(lines[0], "linearizable") ||
		!strings.HasSuffix(lines[1], "PASS") || !strings.Contains(lines[2], "inconclusive") || !strings.HasSuffix(lines[2], "FAIL") {
		t.Fatalf("table:\n%s", buf.String())
	}
}

func Test_WriteRun(t *testing.T) {
	dir := t.TempDir()
	ops := []Op{op(0, KindRegister, "a", 0, 10, ResultOK), read(1, "a", 20, 30), sel(0, ResultOK, 0, 5)}
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
