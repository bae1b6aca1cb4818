package cluster

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
)

// stringer is a fmt.Stringer that encoding/json would render as {}.
type stringer struct{ name string }

func (s *stringer) String() string { return "node " + s.name }

// Test_HCLogJSONShowsValues: raft's log values come out of the JSON
// handler as what they say, not as encoding/json's view of their fields.
func Test_HCLogJSONShowsValues(t *testing.T) {
	dialErr := &net.OpError{Op: "dial", Net: "tcp", Err: errors.New("connect: connection refused")}
	when := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	tests := []struct {
		name  string
		value any
		want  any // as decoded from the JSON line
	}{
		{"error", errors.New("boom"), "boom"},
		{"wrapped network error", fmt.Errorf("append: %w", dialErr), "append: dial tcp: connect: connection refused"},
		{"Stringer", &stringer{"n1"}, "node n1"},
		{"nil Stringer", (*stringer)(nil), nil},
		{"duration", 1500 * time.Millisecond, "1.5s"},
		{"suffrage", raft.Nonvoter, "Nonvoter"},
		{"raft.ServerAddress", raft.ServerAddress("127.0.0.1:7001"), "127.0.0.1:7001"},
		{"raft.ServerID", raft.ServerID("n2"), "n2"},
		{"raft.Server", raft.Server{Suffrage: raft.Voter, ID: "n2", Address: "127.0.0.1:7002"},
			map[string]any{"id": "n2", "address": "127.0.0.1:7002", "suffrage": "Voter"}},
		{"*raft.Server", &raft.Server{Suffrage: raft.Voter, ID: "n3", Address: "127.0.0.1:7003"},
			map[string]any{"id": "n3", "address": "127.0.0.1:7003", "suffrage": "Voter"}},
		{"hclog.Fmt", hclog.Fmt("%d of %s", 2, "3"), "2 of 3"},
		{"number", 42, float64(42)},
		{"time", when, when.Format(time.RFC3339)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var buf bytes.Buffer
			newHCLog(slog.New(slog.NewJSONHandler(&buf, nil)), nil).Info("msg", "v", tt.value)
			var line map[string]any
			if err := json.Unmarshal(buf.Bytes(), &line); err != nil {
				t.Fatalf("%v: %s", err, buf.String())
			}
			if got := line["v"]; !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("v = %#v, want %#v (line %s)", got, tt.want, strings.TrimSpace(buf.String()))
			}
		})
	}
}

// Test_HCLogTextShowsServerFields: a raft.Server reads as its fields in
// the text format too, and implied args (With) are rendered like the
// others.
func Test_HCLogTextShowsServerFields(t *testing.T) {
	var buf bytes.Buffer
	l := newHCLog(slog.New(slog.NewTextHandler(&buf, nil)), nil).With("local", raft.ServerAddress("127.0.0.1:7001"))
	l.Info("pipelining replication", "peer", raft.Server{Suffrage: raft.Voter, ID: "n2", Address: "127.0.0.1:7002"})
	for _, want := range []string{"local=127.0.0.1:7001", "peer.id=n2", "peer.address=127.0.0.1:7002", "peer.suffrage=Voter"} {
		if !strings.Contains(buf.String(), want) {
			t.Fatalf("%q not in %s", want, buf.String())
		}
	}
}

// Test_HCLogDemotesPeerFailures: raft's line for each failed RPC to a peer
// goes to DEBUG (peerHealth reports the outage); other errors keep their
// level.
func Test_HCLogDemotesPeerFailures(t *testing.T) {
	peer := raft.Server{Suffrage: raft.Voter, ID: "n2", Address: "127.0.0.1:7002"}
	refused := errors.New("dial tcp 127.0.0.1:7002: connect: connection refused")
	tests := []struct {
		level hclog.Level
		msg   string
		args  []any
		want  slog.Level
	}{
		{hclog.Error, "failed to heartbeat to", []any{"peer", peer.Address, "backoff time", 10 * time.Millisecond, "error", refused}, slog.LevelDebug},
		{hclog.Error, "failed to appendEntries to", []any{"peer", peer, "error", refused}, slog.LevelDebug},
		{hclog.Error, "failed to pipeline appendEntries", []any{"peer", peer, "error", refused}, slog.LevelDebug},
		{hclog.Error, "failed to start pipeline replication to", []any{"peer", peer, "error", refused}, slog.LevelDebug},
		{hclog.Error, "failed to make requestVote RPC", []any{"target", peer, "error", refused, "term", 3}, slog.LevelDebug},
		{hclog.Warn, "failed to contact", []any{"server-id", peer.ID, "time", 600 * time.Millisecond}, slog.LevelDebug},
		{hclog.Error, "failed to decode incoming command", []any{"error", raft.ErrTransportShutdown}, slog.LevelDebug},
		{hclog.Error, "failed to decode incoming command", []any{"error", io.ErrUnexpectedEOF}, slog.LevelError},
		{hclog.Error, "failed to decode incoming command", []any{"error", &net.OpError{Op: "read", Net: "tcp", Err: net.ErrClosed}}, slog.LevelDebug},
		{hclog.Error, "failed to commit logs", []any{"error", refused}, slog.LevelError},
		{hclog.Warn, "failed to contact quorum of nodes, stepping down", nil, slog.LevelWarn},
		{hclog.Info, "entering leader state", nil, slog.LevelInfo},
	}
	for _, tt := range tests {
		t.Run(tt.msg, func(t *testing.T) {
			c := newLogCapture(slog.LevelDebug)
			newHCLog(slog.New(c), nil).Log(tt.level, tt.msg, tt.args...)
			recs := c.all()
			if len(recs) != 1 || recs[0].Level != tt.want {
				t.Fatalf("got %+v, want one record at %v", recs, tt.want)
			}
		})
	}
	// Demoted lines cost nothing when DEBUG is off.
	c := newLogCapture(slog.LevelInfo)
	newHCLog(slog.New(c), nil).Error("failed to heartbeat to", "peer", peer.Address, "error", refused)
	if recs := c.all(); len(recs) != 0 {
		t.Fatalf("at INFO: %+v", recs)
	}
}
