package cluster

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
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
			newHCLog(slog.New(slog.NewJSONHandler(&buf, nil))).Info("msg", "v", tt.value)
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
	l := newHCLog(slog.New(slog.NewTextHandler(&buf, nil))).With("local", raft.ServerAddress("127.0.0.1:7001"))
	l.Info("pipelining replication", "peer", raft.Server{Suffrage: raft.Voter, ID: "n2", Address: "127.0.0.1:7002"})
	for _, want := range []string{"local=127.0.0.1:7001", "peer.id=n2", "peer.address=127.0.0.1:7002", "peer.suffrage=Voter"} {
		if !strings.Contains(buf.String(), want) {
			t.Fatalf("%q not in %s", want, buf.String())
		}
	}
}
