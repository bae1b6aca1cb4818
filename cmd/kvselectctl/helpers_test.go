package main

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/kvselect/kvselect/api"
)

// apiErr is an API error body.
func apiErr(code, msg string) api.Error { return api.Error{Message: msg, Code: api.Code(code)} }

// tokenFile writes a token file and returns its path.
func tokenFile(t *testing.T, token string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(path, []byte(token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// runCLI runs the CLI in-process.
func runCLI(t *testing.T, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	var out, errb bytes.Buffer
	code = run(args, &out, &errb)
	return out.String(), errb.String(), code
}
