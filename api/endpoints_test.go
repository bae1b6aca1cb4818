package api_test

import (
	"strings"
	"testing"

	"github.com/kvselect/kvselect/api"
)

// Test_CheckWorkerEndpoint: every endpoint form the project documents and
// uses (seed 000, the README, kvsim with and without its control API, the
// tests' and clients' examples) is accepted; malformed ones are refused
// with a message that quotes them.
func Test_CheckWorkerEndpoint(t *testing.T) {
	accepted := []string{
		"http://worker:8000",                   // seed 000
		"http://worker-101:8000",               // README, clients
		"http://127.0.0.1:8094/workers/11",     // kvsim's control API (README, make run)
		"kvsim://127.0.0.1/workers/11",         // kvsim with nothing serving it
		"kvsim://[::1]/workers/3",              // kvsim advertising IPv6
		"http://w",                             // tests
		"http://w7:8000",                       // tests
		"https://worker-1.example.com:8443/v1", // TLS, with a path
		"http://[::1]:8000",
		"http://10.0.0.5:8000/generate?x=1",
		"HTTP://Worker_1.local.:8000",
		"grpc://worker:50051",
	}
	for _, ep := range accepted {
		if err := api.CheckWorkerEndpoint(ep); err != nil {
			t.Errorf("%q refused: %v", ep, err)
		}
	}
	refused := []struct{ ep, mention string }{
		{"worker:8000", "not a URL with a host"},
		{"worker", "not a URL with a host"},
		{"/workers/1", "not a URL with a host"},
		{"http//worker:8000", "not a URL with a host"},
		{"http://", "not a URL with a host"},
		{"http:///workers/1", "not a URL with a host"},
		{"://worker:8000", "not a URL with a host"},
		{"mailto:ops@example.com", "not a URL with a host"},
		{"http://:8000", "host is missing"},
		{"http://worker:0", "port"},
		{"http://worker:65536", "port"},
		{"http://worker:", "port"},
		{"http://worker:80a", "not a URL"},
		{"http://wor ker:8000", "space or control character at byte 10"},
		{"http://worker:8000/a b", "space or control character"},
		{" http://worker:8000", "space or control character at byte 0"},
		{"http://worker:8000\n", "space or control character"},
		{"http://worker\t:8000", "space or control character"},
		{"http://worker\x7f:8000", "space or control character"},
		{"http://a..b:8000", "not a valid host name"},
		{"http://wörker:8000", "not a valid host name"},
		{"http://[::1:8000", "not a URL"},
		{"http://" + strings.Repeat("a", 64) + ":8000", "not a valid host name"},
	}
	for _, tt := range refused {
		err := api.CheckWorkerEndpoint(tt.ep)
		if err == nil || !strings.Contains(err.Error(), tt.mention) {
			t.Errorf("%q: %v, want an error mentioning %q", tt.ep, err, tt.mention)
		}
	}
}

// Test_CheckZMQEndpoint: the KV event and replay endpoints the project
// uses are accepted; what a ZMQ socket cannot connect to is refused.
func Test_CheckZMQEndpoint(t *testing.T) {
	for _, ep := range []string{
		"tcp://127.0.0.1:5557", "tcp://worker:5560", "tcp://w7:5557", "tcp://[::1]:5557",
		"tcp://localhost:5558", "ipc:///tmp/kv-events.sock", "inproc://kvselect-slot-tracker",
	} {
		if err := api.CheckZMQEndpoint(ep); err != nil {
			t.Errorf("%q refused: %v", ep, err)
		}
	}
	for _, tt := range []struct{ ep, mention string }{
		{"tcp://wor ker:5557", "space or control character"},
		{"ipc:///tmp/a b", "space or control character"},
		{"inproc://x\x00", "space or control character"},
		{"tcp://127.0.0.1:5557\r\n", "space or control character"},
		{"tcp://*:5557", "not a valid host name"},
		{"tcp://worker", "want tcp://host:port"},
		{"tcp://worker:0", "port"},
		{"tcp://worker:99999", "port"},
		{"tcp://:5557", "host is missing"},
		{"http://worker:5557", "unsupported transport"},
		{"worker:5557", "not a ZMQ endpoint"},
		{"", "not a ZMQ endpoint"},
	} {
		err := api.CheckZMQEndpoint(tt.ep)
		if err == nil || !strings.Contains(err.Error(), tt.mention) {
			t.Errorf("%q: %v, want an error mentioning %q", tt.ep, err, tt.mention)
		}
	}
}

// Test_CheckEndpoints: a registration or patch names the field at fault by
// its wire name; an empty endpoint (clearing it) is not an error.
func Test_CheckEndpoints(t *testing.T) {
	s := func(v string) *string { return &v }
	tests := []struct {
		name  string
		patch api.WorkerFields
		field string // "" when accepted
	}{
		{"nothing", api.WorkerFields{}, ""},
		{"cleared endpoint", api.WorkerFields{Endpoint: s("")}, ""},
		{"cleared replay endpoint", api.WorkerFields{ReplayEndpoint: s("")}, ""},
		{"good", api.WorkerFields{Endpoint: s("http://worker:8000"), KVEventsEndpoint: s("tcp://worker:5557"),
			ReplayEndpoint: s("tcp://worker:5560")}, ""},
		{"endpoint", api.WorkerFields{Endpoint: s("worker:8000")}, "endpoint"},
		{"single kv events endpoint", api.WorkerFields{KVEventsEndpoint: s("tcp://w 1:1")}, "kv_events_endpoint"},
		{"kv events map, lowest bad rank", api.WorkerFields{KVEventsEndpoints: &map[uint32]string{
			0: "tcp://w:1", 3: "tcp://w:0", 2: "tcp://w:", 7: "x"}}, `kv_events_endpoints["2"]`},
		{"replay endpoint", api.WorkerFields{ReplayEndpoint: s("tcp://w:5560\n")}, "replay_endpoint"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.patch.CheckEndpoints()
			if tt.field == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			fe, ok := err.(*api.FieldError)
			if !ok || fe.Field != tt.field {
				t.Fatalf("CheckEndpoints = %v, want a FieldError of %s", err, tt.field)
			}
		})
	}
}
