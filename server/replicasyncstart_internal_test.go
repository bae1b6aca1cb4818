package server

import (
	"bytes"
	"errors"
	"log/slog"
	"strings"
	"testing"
)

// Test_SwitchReplicaSyncAfterStop: once Close closed s.stop, the switch
// starts nothing, whatever the runner's select picked (a catalog change
// or a tick races the stop). The server here has no Raft node at all:
// the switch must not get as far as asking it for its members, let alone
// bind a socket.
func Test_SwitchReplicaSyncAfterStop(t *testing.T) {
	s := &Server{stop: make(chan struct{}), cfg: Config{ReplicaSync: &ReplicaSyncConfig{Listen: "tcp://127.0.0.1:0"}},
		log: slog.New(slog.DiscardHandler)}
	close(s.stop)
	defer func() {
		if r := recover(); r != nil {
			t.Fatalf("switchReplicaSync went on after the stop: %v", r)
		}
	}()
	if on, err := s.switchReplicaSync(); on || err != nil {
		t.Fatalf("switchReplicaSync after the stop = %v, %v; want false, nil", on, err)
	}
	if s.Sync() != nil {
		t.Fatal("replica sync started after the stop")
	}
}

// Test_StartFailuresLogOnceThenSummarise: a start that keeps failing logs
// one ERROR, repeats at DEBUG, a WARN summary every tenth failure, and
// waits longer each time up to switchRetryMax. It used to log an ERROR
// every second for as long as the node ran.
func Test_StartFailuresLogOnceThenSummarise(t *testing.T) {
	var buf bytes.Buffer
	f := newStartFailures(slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug})))
	err := errors.New("address already in use")
	var last, longest = f.failed(err), f.failed(err)
	for range 98 {
		d := f.failed(err)
		if d > switchRetryMax+switchRetryMax/5 {
			t.Fatalf("a retry waits %v, longer than the cap %v (and its jitter)", d, switchRetryMax)
		}
		longest = max(longest, d)
	}
	if last > switchCheckEvery+switchCheckEvery/5 || longest < switchRetryMax {
		t.Fatalf("the first retry waits %v, the longest %v; want %v then growing to %v", last, longest, switchCheckEvery, switchRetryMax)
	}
	out := buf.String()
	count := func(level string) int { return strings.Count(out, "level="+level+" ") }
	if count("ERROR") != 1 || count("WARN") != 9 || count("DEBUG") != 90 {
		t.Fatalf("100 failures logged %d ERROR, %d WARN, %d DEBUG lines; want 1, 9 (failures 11, 21, … 91) and 90:\n%s",
			count("ERROR"), count("WARN"), count("DEBUG"), out)
	}
	if !strings.Contains(out, "failures=91") {
		t.Fatalf("the last summary does not say how many failed:\n%s", out)
	}
}
