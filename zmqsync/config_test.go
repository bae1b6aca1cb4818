package zmqsync

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/kvselect/kvselect/scheduler/replica"
)

// Test_ConfigValidate: zero fields are the defaults and valid; what Start
// cannot run with is refused with ErrInvalidConfig, naming the field.
func Test_ConfigValidate(t *testing.T) {
	apply := func(string, *replica.Event) string { return "" }
	for _, tt := range []struct {
		name   string
		mutate func(*Config)
		want   string // "" when valid
	}{
		{"minimal", func(*Config) {}, ""},
		{"named port, advertise and peers", func(c *Config) {
			c.Listen, c.Advertise, c.Peers = "tcp://0.0.0.0:7093", "tcp://kv-0:7093", []string{"tcp://kv-1:7093"}
		}, ""},
		{"wildcard host", func(c *Config) { c.Listen = "tcp://*:0" }, ""},
		{"negative grace and linger turn them off", func(c *Config) { c.PreviousTokenGrace, c.DepartedLinger = -1, -1 }, ""},
		{"no node id", func(c *Config) { c.NodeID = "" }, "NodeID and Apply are required"},
		{"no apply", func(c *Config) { c.Apply = nil }, "NodeID and Apply are required"},
		{"listen not tcp", func(c *Config) { c.Listen = "ipc:///tmp/x" }, "Listen"},
		{"listen port out of range", func(c *Config) { c.Listen = "tcp://0.0.0.0:70000" }, "from 0 (the OS chooses) to 65535"},
		{"advertise with port 0", func(c *Config) { c.Advertise = "tcp://kv-0:0" }, "Advertise/Peers"},
		{"peer without a port", func(c *Config) { c.Peers = []string{"tcp://kv-1"} }, "Advertise/Peers"},
		{"negative anti-entropy period", func(c *Config) { c.AntiEntropyPeriod = -time.Second }, "AntiEntropyPeriod must be positive"},
		{"negative send queue", func(c *Config) { c.SendQueue = -1 }, "SendQueue must be at least 1"},
		{"negative backoff", func(c *Config) { c.BackoffMin = -time.Second }, "BackoffMin must be positive"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c := Config{NodeID: "n1", Listen: "tcp://127.0.0.1:0", Apply: apply}
			tt.mutate(&c)
			err := c.Validate()
			switch {
			case tt.want == "" && err != nil:
				t.Fatalf("Validate: %v", err)
			case tt.want == "":
			case !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), tt.want):
				t.Fatalf("Validate = %v, want ErrInvalidConfig saying %q", err, tt.want)
			}
		})
	}
}
