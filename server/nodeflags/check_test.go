package nodeflags

import (
	"strings"
	"testing"
)

// Test_Check: a harness's command line is judged by the node's own
// definitions, its messages kept, and the environment left out.
func Test_Check(t *testing.T) {
	t.Setenv("KVSELECT_PORT", "eighty") // Parse would refuse it; Check does not read it
	tests := []struct {
		name string
		args []string
		want string // part of the error; "" for none
	}{
		{"a node of a harness", []string{"--node-id", "n1", "--bind", "127.0.0.1", "--port", "0",
			"--peer-dial", "n2=127.0.0.1:1/127.0.0.1:2", "--raft-trailing-logs", "64"}, ""},
		{"a flag that does not exist", []string{"--raft-trailing-log", "64"}, "unknown flag --raft-trailing-log (did you mean --raft-trailing-logs?)"},
		{"a value that does not parse", []string{"--leader-wait", "soon"}, `invalid value "soon" for flag --leader-wait`},
		{"a combination the node refuses", []string{"--tls-cert-file", "c.pem"}, "--tls-cert-file and --tls-key-file go together"},
		{"a stray argument", []string{"--port", "1", "extra"}, `unknown command "extra"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := Check(tt.args)
			if tt.want == "" && err != nil || tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)) {
				t.Fatalf("Check(%q) = %v, want %q", tt.args, err, tt.want)
			}
		})
	}
}
