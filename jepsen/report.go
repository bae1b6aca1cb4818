package jepsen

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/anishathalye/porcupine"
)

// RunSummary is the outcome of one nemesis run, one row of PrintTable
// and the run's summary.json. Failures judges it.
type RunSummary struct {
	Nemesis string `json:"nemesis"`
	// Duration is how long the workload ran (nanoseconds in JSON).
	Duration time.Duration `json:"duration"`
	// Worker catalog ops by result.
	OpsOK      int `json:"ops_ok"`
	OpsFail    int `json:"ops_fail"`
	OpsUnknown int `json:"ops_unknown"`
	// CatalogOpsChecked and CatalogWorkerIDs say what porcupine saw
	// (worker and threshold ops; worker ids and the thresholds).
	CatalogOpsChecked int     `json:"catalog_ops_checked"`
	CatalogWorkerIDs  int     `json:"catalog_worker_ids"`
	Linearizable      Verdict `json:"linearizable"`
	// LostWrites counts acknowledged writes missing from the final
	// catalog; it means nothing unless LostWritesChecked.
	LostWrites        int         `json:"lost_writes"`
	LostWritesChecked bool        `json:"lost_writes_checked"`
	Lost              []LostWrite `json:"lost,omitempty"`
	CatalogConverged  Verdict     `json:"catalog_converged"`
	IndexConverged    Verdict     `json:"index_converged"`
	// LoadsZero: every node's load back to zero within LoadsZeroBound of
	// the final heal.
	LoadsZero Verdict `json:"loads_zero"`
	// Selection availability: select_and_reserve answers by result (busy
	// answers apart: an expected outcome), per node the successful ones,
	// the failures on nodes the nemesis did not take down, and per node
	// the longest stretch from a failed selection to the next answered one
	// (nanoseconds in JSON), judged against UnavailableBound.
	SelectOK         int             `json:"select_ok"`
	SelectBusy       int             `json:"select_busy"`
	SelectFail       int             `json:"select_fail"`
	SelectFailLive   int             `json:"select_fail_live"`
	SelectOKPerNode  []int           `json:"select_ok_per_node"`
	MaxUnavailable   []time.Duration `json:"max_unavailable"`
	UnavailableBound time.Duration   `json:"unavailable_bound"`
	// Busy thresholds: acknowledged writes, judged probes and the probes
	// that booked a worker, busy answers no tight threshold explains.
	ThresholdWritesOK int `json:"threshold_writes_ok"`
	BusyProbes        int `json:"busy_probes"`
	BusyProbeFailures int `json:"busy_probe_failures"`
	BusyUnexplained   int `json:"busy_unexplained"`
	// Leases: acknowledged renewals, lapses seen, leases lost early
	// (CheckLeases), and whether every lease lapsed after the run.
	LeaseRenewalsOK int     `json:"lease_renewals_ok"`
	LeaseLapses     int     `json:"lease_lapses"`
	LeaseViolations int     `json:"lease_violations"`
	LeasesLapsed    Verdict `json:"leases_lapsed"`
	// MemberChanges counts followers removed and back as voters.
	MemberChanges int `json:"member_changes"`
	// Problems says why a checker failed or could not run.
	Problems []string `json:"problems,omitempty"`
}

// Summarize counts a history's ops over the given number of nodes, with
// the nemesis windows (for the nodes they take down): catalog ops,
// selection availability against the nemesis's bound
// (SelectionGapBound), busy answers and probes, threshold writes and
// leases. Verdicts start as not checked; the caller fills them in from
// the checkers.
func Summarize(nemesis string, ops []Op, nodes int, windows []Window) RunSummary {
	s := RunSummary{Nemesis: nemesis, Linearizable: VerdictNotChecked, CatalogConverged: VerdictNotChecked,
		IndexConverged: VerdictNotChecked, LoadsZero: VerdictNotChecked, LeasesLapsed: VerdictNotChecked,
		UnavailableBound: SelectionGapBound(nemesis), SelectOKPerNode: make([]int, nodes)}
	for _, op := range ops {
		switch {
		case op.IsCatalog():
			switch op.Result {
			case ResultOK:
				s.OpsOK++
			case ResultFail:
				s.OpsFail++
			default:
				s.OpsUnknown++
			}
		case op.IsThreshold() && op.IsWrite() && op.Result == ResultOK:
			s.ThresholdWritesOK++
		case op.Kind == KindBusyProbe && op.Result != ResultUnknown:
			s.BusyProbes++
			if op.Result != ResultOK {
				s.BusyProbeFailures++
				s.Problems = append(s.Problems, fmt.Sprintf("busy probe %s on %s at %v: %s", op.ReservationID, NodeID(op.Node), op.Call, op.Error))
			}
		case op.Kind == KindSelectAndReserve && op.Result == ResultOK && op.Busy:
			s.SelectBusy++
		case op.Kind == KindSelectAndReserve && op.Result == ResultOK:
			s.SelectOK++
			if op.Node >= 0 && op.Node < nodes {
				s.SelectOKPerNode[op.Node]++
			}
		case op.Kind == KindSelectAndReserve && op.Result == ResultFail:
			s.SelectFail++
			if op.Node < 0 || op.Node >= nodes || !tookDown(windows, op.Node, op.Call, op.Return) {
				s.SelectFailLive++
			}
		}
	}
	s.MaxUnavailable = MaxUnavailability(ops, nodes, windows)
	for _, b := range UnexplainedBusy(ops, BusyWindows(ops, windows)) {
		s.BusyUnexplained++
		if s.BusyUnexplained <= 3 {
			s.Problems = append(s.Problems, fmt.Sprintf("%s answered busy at %v with no tight threshold that could be in force", NodeID(b.Node), b.Call))
		}
	}
	lc := CheckLeases(ops)
	s.LeaseRenewalsOK, s.LeaseLapses, s.LeaseViolations = lc.RenewalsOK, lc.Lapses, len(lc.Violations)
	s.Problems = append(s.Problems, lc.Violations...)
	return s
}

// SetCatalogCheck records a linearizability verdict.
func (s *RunSummary) SetCatalogCheck(c CatalogCheck) {
	s.Linearizable, s.CatalogOpsChecked, s.CatalogWorkerIDs = c.Verdict, c.Ops, c.WorkerIDs
}

// SetLostWrites records the lost-write check.
func (s *RunSummary) SetLostWrites(lost []LostWrite) {
	s.LostWritesChecked, s.LostWrites, s.Lost = true, len(lost), lost
	for _, l := range lost {
		s.Problems = append(s.Problems, fmt.Sprintf("lost write: %s of %s at %v (want %q, got %q)",
			l.Op.Kind, opKey(l.Op), l.Op.Call, l.Want, l.Got))
	}
}

// Converged turns a convergence checker's error into a verdict, keeping
// the error as a problem.
func (s *RunSummary) Converged(err error) Verdict {
	if err == nil {
		return VerdictYes
	}
	s.Problems = append(s.Problems, err.Error())
	return VerdictNo
}

// Failures says why the run fails; none when it passes. Every check must
// have run and held (a verdict not checked or inconclusive fails):
// linearizability, no lost write, the catalog (with thresholds), index
// and loads converged, every lease lapsed after the run; on every node,
// no stretch without a successful selection longer than the nemesis's
// bound, except on nodes it took down itself, and at most
// MaxLiveSelectFailRatio of selections failed there; no busy answer
// without a tight threshold and no probe that booked past one; no lease
// lost early; and a minimum of work done (Min*), so a run that did
// nothing fails. Problems fail it too.
func (s RunSummary) Failures() []string {
	var out []string
	fail := func(format string, args ...any) { out = append(out, fmt.Sprintf(format, args...)) }
	for _, v := range []struct {
		name string
		v    Verdict
	}{{"linearizable", s.Linearizable}, {"catalog converged", s.CatalogConverged}, {"index converged", s.IndexConverged},
		{"loads zero", s.LoadsZero}, {"leases lapsed", s.LeasesLapsed}} {
		if v.v != VerdictYes {
			fail("%s: %s", v.name, v.v)
		}
	}
	if !s.LostWritesChecked {
		fail("lost writes not checked")
	} else if s.LostWrites > 0 {
		fail("%d acknowledged writes lost", s.LostWrites)
	}
	if s.UnavailableBound <= 0 {
		fail("no selection availability bound for nemesis %q", s.Nemesis)
	}
	for i, d := range s.MaxUnavailable {
		if d > s.UnavailableBound {
			fail("%s went %v without a successful selection (bound %v)", NodeID(i), d.Round(time.Millisecond), s.UnavailableBound)
		}
	}
	if answered := s.SelectOK + s.SelectBusy + s.SelectFailLive; float64(s.SelectFailLive) > MaxLiveSelectFailRatio*float64(answered) {
		fail("%d of %d selections failed on nodes the nemesis did not take down (at most %g%%)", s.SelectFailLive, answered, 100*MaxLiveSelectFailRatio)
	}
	if s.BusyUnexplained > 0 {
		fail("%d busy answers with no tight threshold in force", s.BusyUnexplained)
	}
	if s.BusyProbeFailures > 0 {
		fail("%d busy probes booked a worker past a tight threshold", s.BusyProbeFailures)
	}
	if s.LeaseViolations > 0 {
		fail("%d leases lost before they could lapse", s.LeaseViolations)
	}
	if min := int(MinCatalogOpsPerSecond * s.Duration.Seconds()); s.OpsOK < max(min, 1) {
		fail("%d acknowledged catalog ops in %v, want at least %d", s.OpsOK, s.Duration.Round(time.Second), max(min, 1))
	}
	if len(s.SelectOKPerNode) == 0 {
		fail("no selections counted per node")
	}
	for i, n := range s.SelectOKPerNode {
		if n < MinSelectsPerNode {
			fail("%d successful selections on %s, want at least %d", n, NodeID(i), MinSelectsPerNode)
		}
	}
	for _, m := range []struct {
		what      string
		got, want int
	}{{"acknowledged threshold writes", s.ThresholdWritesOK, MinThresholdWrites}, {"judged busy probes", s.BusyProbes, MinBusyProbes},
		{"acknowledged lease renewals", s.LeaseRenewalsOK, MinLeaseRenewals}, {"leases seen to lapse", s.LeaseLapses, MinLeaseLapses},
		{"membership changes", s.MemberChanges, MinMemberChanges}} {
		if m.got < m.want {
			fail("%d %s, want at least %d", m.got, m.what, m.want)
		}
	}
	if len(s.Problems) > 0 {
		fail("%d problems", len(s.Problems))
	}
	return out
}

// Passed reports whether the run passed: Failures is empty.
func (s RunSummary) Passed() bool { return len(s.Failures()) == 0 }

// MaxUnavailability is, per node, the longest stretch during which its
// selections failed: from the call of a failed select_and_reserve to the
// call of the next successful one on that node (a worker booked, or load
// shedding's busy answer: the node answered as it should), or the return
// of the last failed one. Unknown attempts are ignored, and so are a node's failures
// in flight during a window that took that very node down (Window.Down):
// a killed or paused node cannot answer, and its own downtime is the
// fault, not a failure of the cluster's promise that every live node
// selects. In flight, not just called inside: a selection the node was
// serving when it was killed fails with a reset connection, and it is
// often called a fraction of a millisecond before the window's recorded
// start (the kill is logged after it is sent).
func MaxUnavailability(ops []Op, nodes int, windows []Window) []time.Duration {
	out := make([]time.Duration, nodes)
	start := make([]time.Duration, nodes)
	lastFail := make([]time.Duration, nodes)
	open := make([]bool, nodes)
	sorted := append([]Op(nil), ops...)
	SortOps(sorted)
	for _, op := range sorted {
		if op.Kind != KindSelectAndReserve || op.Node < 0 || op.Node >= nodes {
			continue
		}
		n := op.Node
		if op.Result == ResultFail && tookDown(windows, n, op.Call, op.Return) {
			continue
		}
		switch op.Result {
		case ResultFail:
			if !open[n] {
				open[n], start[n] = true, op.Call
			}
			lastFail[n] = op.Return
		case ResultOK:
			if open[n] {
				out[n] = max(out[n], op.Call-start[n])
				open[n] = false
			}
		}
	}
	for n := range out {
		if open[n] {
			out[n] = max(out[n], lastFail[n]-start[n])
		}
	}
	return out
}

// tookDown reports whether a window overlapping [call, ret] took node n
// down.
func tookDown(windows []Window, n int, call, ret time.Duration) bool {
	for _, w := range windows {
		if call <= w.End && ret >= w.Start && slices.Contains(w.Down, n) {
			return true
		}
	}
	return false
}

// Window is a stretch of the run (a nemesis fault, from inject to heal) to
// show on the HTML timeline, in the history's time base.
type Window struct {
	Name       string
	Start, End time.Duration
	Detail     string
	Down       []int // nodes taken down on purpose (NemesisEvent.Down)
}

// Files a run writes into its directory.
const (
	HistoryFile = "history.jsonl"
	NemesisFile = "nemesis.jsonl"
	HTMLFile    = "history.html"
	SummaryFile = "summary.json"
)

// WriteRun writes a run's outputs into dir (created if needed):
// history.jsonl, nemesis.jsonl (one JSON line per element of the slice
// nemesis; nil writes an empty file), history.html (porcupine's timeline
// of the catalog check, with windows as nemesis annotations; skipped when
// check is nil) and summary.json.
func WriteRun(dir string, ops []Op, nemesis any, windows []Window, check *CatalogCheck, sum RunSummary) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if err := writeFile(filepath.Join(dir, HistoryFile), func(w io.Writer) error { return WriteJSONL(w, ops) }); err != nil {
		return err
	}
	if err := writeFile(filepath.Join(dir, NemesisFile), func(w io.Writer) error { return WriteJSONLines(w, nemesis) }); err != nil {
		return err
	}
	if check != nil {
		info := check.Info
		info.AddAnnotations(annotations(windows))
		if err := porcupine.VisualizePath(CatalogModel(), info, filepath.Join(dir, HTMLFile)); err != nil {
			return fmt.Errorf("history.html: %w", err)
		}
	}
	return writeFile(filepath.Join(dir, SummaryFile), func(w io.Writer) error {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(sum)
	})
}

func annotations(windows []Window) []porcupine.Annotation {
	out := make([]porcupine.Annotation, 0, len(windows))
	for _, w := range windows {
		out = append(out, porcupine.Annotation{Tag: "nemesis", Start: int64(w.Start), End: int64(w.End),
			Description: w.Name, Details: w.Detail, BackgroundColor: "#f4cccc"})
	}
	return out
}

func writeFile(path string, write func(io.Writer) error) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := write(f); err != nil {
		f.Close()
		return fmt.Errorf("%s: %w", path, err)
	}
	return f.Close()
}

// WriteJSONLines writes each element of the slice (or array) events as
// one JSON line; nil writes nothing. It takes any slice so that callers
// keep their own event types.
func WriteJSONLines(w io.Writer, events any) error {
	if events == nil {
		return nil
	}
	v := reflect.ValueOf(events)
	if v.Kind() != reflect.Slice && v.Kind() != reflect.Array {
		return fmt.Errorf("jepsen: events must be a slice, not %T", events)
	}
	enc := json.NewEncoder(w)
	for i := range v.Len() {
		if err := enc.Encode(v.Index(i).Interface()); err != nil {
			return err
		}
	}
	return nil
}

// PrintTable prints one line per run: nemesis, catalog ops
// ok/fail/unknown, linearizable, lost writes, catalog/index/load
// convergence, leases (renewals/lapses, lapsed after the run),
// selections ok/busy/fail (live failures), each node's longest
// unavailability against the nemesis's bound, and the verdict.
func PrintTable(w io.Writer, runs []RunSummary) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "nemesis\tops ok/fail/unknown\tlinearizable\tlost writes\tcatalog\tindex\tloads\tleases\tselect ok/busy/fail(live)\tmax unavailable (bound)\tpass")
	for _, r := range runs {
		lost := "-"
		if r.LostWritesChecked {
			lost = fmt.Sprint(r.LostWrites)
		}
		unavail := make([]string, len(r.MaxUnavailable))
		for i, d := range r.MaxUnavailable {
			unavail[i] = fmt.Sprintf("%s=%s", NodeID(i), d.Round(time.Millisecond))
		}
		pass := "PASS"
		if !r.Passed() {
			pass = "FAIL"
		}
		fmt.Fprintf(tw, "%s\t%d/%d/%d\t%s\t%s\t%s\t%s\t%s\t%d/%d %s\t%d/%d/%d(%d)\t%s (%v)\t%s\n", r.Nemesis, r.OpsOK, r.OpsFail, r.OpsUnknown,
			r.Linearizable, lost, r.CatalogConverged, r.IndexConverged, r.LoadsZero, r.LeaseRenewalsOK, r.LeaseLapses, r.LeasesLapsed,
			r.SelectOK, r.SelectBusy, r.SelectFail, r.SelectFailLive, strings.Join(unavail, " "), r.UnavailableBound, pass)
	}
	tw.Flush()
}
