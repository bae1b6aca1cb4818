package http

import (
	"context"
	"log/slog"
	"strings"
	"testing"

	"github.com/kvselect/kvselect/cluster"
	"github.com/kvselect/kvselect/fsm"
	"github.com/kvselect/kvselect/internal/testlog"
	"github.com/kvselect/kvselect/scheduler"
)

// Test_NormalAnswersAreNotWarnings: a 503 that is the node's ordinary
// answer (/ready without a schedulable worker; /dump and /select while
// not ready) is logged at DEBUG only, while a 503 that is a failure
// (no leader for a write) is a warning that names the error.
func Test_NormalAnswersAreNotWarnings(t *testing.T) {
	tests := []struct {
		name         string
		method, path string
		body         string
		recovering   bool
		fake         func(f *fakeNode)
		status       int
		warn         string // "" when nothing may be logged above DEBUG
	}{
		{"ready without workers", "GET", "/ready", "", false, nil, 503, ""},
		{"dump while recovering", "GET", "/dump", "", true, nil, 503, ""},
		{"select without a schedulable worker", "POST", "/select", `{"block_hashes":[1],"sequence_hashes":[1],"isl_tokens":16}`, false,
			func(f *fakeNode) {
				f.sel = func(scheduler.SelectRequest) (scheduler.Selection, error) {
					return scheduler.Selection{}, scheduler.ErrNotReady
				}
			}, 503, ""},
		{"write without a leader", "DELETE", "/workers/1", "", false,
			func(f *fakeNode) {
				f.apply = func(context.Context, fsm.Command) (*fsm.Result, error) { return nil, cluster.ErrNoLeader }
			}, 503, "level=WARN msg=\"request failed\""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFakeNode()
			if tt.fake != nil {
				tt.fake(f)
			}
			var logs testlog.Buffer
			flag := &recoveringFlag{}
			flag.Store(tt.recovering)
			url := serve(t, f.service(func(c *Config) {
				c.Logger = logs.Logger(slog.LevelInfo)
				c.Recovery = flag
			}))
			if status, _, body := call(t, tt.method, url+tt.path, tt.body); status != tt.status {
				t.Fatalf("%s %s: %d %s", tt.method, tt.path, status, body)
			}
			got := logs.String()
			switch {
			case tt.warn == "" && got != "":
				t.Fatalf("logged above DEBUG:\n%s", got)
			case tt.warn != "" && (!strings.Contains(got, tt.warn) || strings.Contains(got, "err=<nil>")):
				t.Fatalf("want a warning with the error, got:\n%s", got)
			}
		})
	}
}
