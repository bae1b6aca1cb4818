package suggest

import (
	"slices"
	"testing"
)

func Test_Distance(t *testing.T) {
	tests := []struct {
		a, b string
		want int
	}{
		{"", "", 0}, {"port", "port", 0}, {"prot", "port", 2}, {"prt", "port", 1}, {"ports", "port", 1},
		{"", "abc", 3}, {"kitten", "sitting", 3},
	}
	for _, tt := range tests {
		if got := Distance(tt.a, tt.b); got != tt.want {
			t.Errorf("Distance(%q, %q) = %d, want %d", tt.a, tt.b, got, tt.want)
		}
	}
}

func Test_Names(t *testing.T) {
	names := []string{"port", "bind", "peer-dial", "replica-sync-port", "raft-addr"}
	tests := []struct {
		typed string
		want  []string
	}{
		{"prot", []string{"port"}},
		{"raft", []string{"raft-addr"}}, // a prefix
		{"p", nil},                      // a shorthand
		{"nothing-like-it", nil},
	}
	for _, tt := range tests {
		if got := Names(tt.typed, names); !slices.Equal(got, tt.want) {
			t.Errorf("Names(%q) = %q, want %q", tt.typed, got, tt.want)
		}
	}
}
