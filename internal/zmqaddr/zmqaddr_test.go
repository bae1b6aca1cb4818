package zmqaddr

import "testing"

func Test_Parse(t *testing.T) {
	tests := []struct {
		ep         string
		ok         bool
		transport  string
		host, port string
	}{
		{"tcp://worker-1:5557", true, "tcp", "worker-1", "5557"},
		{"tcp://[::1]:5557", true, "tcp", "::1", "5557"},
		{"ipc:///tmp/kv.sock", true, "ipc", "", ""},
		{"inproc://rank-0", true, "inproc", "", ""},
		{"tcp://*:5557", true, "tcp", "*", "5557"}, // a bind address: callers judge hosts
		{"tcp://:5557", true, "tcp", "", "5557"},
		{"tcp://h:0", false, "", "", ""},
		{"tcp://h:65536", false, "", "", ""},
		{"tcp://h", false, "", "", ""},
		{"http://h:1", false, "", "", ""},
		{"tcp://", false, "", "", ""},
		{"worker:5557", false, "", "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.ep, func(t *testing.T) {
			got, err := Parse(tt.ep)
			if (err == nil) != tt.ok {
				t.Fatalf("Parse(%q) err = %v, want ok %v", tt.ep, err, tt.ok)
			}
			if tt.ok && (got.Transport != tt.transport || got.Host != tt.host || got.Port != tt.port) {
				t.Fatalf("Parse(%q) = %+v", tt.ep, got)
			}
		})
	}
}
