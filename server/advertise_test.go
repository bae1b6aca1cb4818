package server

import "testing"

func Test_HTTPAdvertiseDefault(t *testing.T) {
	tests := []struct{ bound, raft, want string }{
		{"127.0.0.1:8092", "10.0.0.5:7092", "127.0.0.1:8092"}, // a specific bind is what others dial
		{"0.0.0.0:8092", "10.0.0.5:7092", "10.0.0.5:8092"},
		{"[::]:8092", "kv-0.kv.default.svc:7092", "kv-0.kv.default.svc:8092"},
		{"0.0.0.0:8092", "127.0.0.1:7092", "127.0.0.1:8092"},
		{"0.0.0.0:8092", "", "127.0.0.1:8092"},
		{"0.0.0.0:8092", "0.0.0.0:7092", "127.0.0.1:8092"},
	}
	for _, tt := range tests {
		if got := httpAdvertise(tt.bound, tt.raft); got != tt.want {
			t.Errorf("httpAdvertise(%q, %q) = %q, want %q", tt.bound, tt.raft, got, tt.want)
		}
	}
}
