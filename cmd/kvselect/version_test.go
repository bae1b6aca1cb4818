package main

import (
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// Test_EveryBinary builds the four binaries as the Makefile does (with the
// version and commit given to the linker) and checks what a user sees
// first: --version, the environment variables in -h, and an invalid
// environment value that names the variable, the flag and the type.
func Test_EveryBinary(t *testing.T) {
	dir := t.TempDir()
	const pkg = "github.com/kvselect/kvselect/internal/version"
	build := exec.Command(filepath.Join(runtime.GOROOT(), "bin", "go"), "build",
		"-ldflags", "-X "+pkg+".Version=v9.8.7 -X "+pkg+".Commit=0123456789ab-modified", "-o", dir+"/", "./cmd/...")
	build.Dir = "../.."
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	run := func(env []string, name string, args ...string) (string, error) {
		cmd := exec.Command(filepath.Join(dir, name), args...)
		cmd.Env = append(cmd.Environ(), env...)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	for _, name := range []string{"kvselect", "kvselectctl", "kvsim", "kvbench"} {
		out, err := run(nil, name, "--version")
		if want := name + " v9.8.7 (commit 0123456789ab, modified, " + runtime.Version() + ")\n"; err != nil || out != want {
			t.Errorf("%s --version = %q, %v; want %q", name, out, err, want)
		}
	}
	for _, tt := range []struct {
		name, want string
	}{
		{"kvselect", "(env KVSELECT_RAFT_ADDR)"},
		{"kvselect", "kvselect slot-tracker [flags]"},
		{"kvselect", "(env KVSELECT_OVERLAP_SCORE_WEIGHT, DYN_KV_OVERLAP_SCORE_WEIGHT, DYN_ROUTER_KV_OVERLAP_SCORE_WEIGHT)"},
		{"kvselectctl", "(env KVSELECT_TOKEN_FILE)"},
		{"kvsim", "(env KVSIM_CACHE_BLOCKS)"},
	} {
		if out, _ := run(nil, tt.name, "-h"); !strings.Contains(out, tt.want) {
			t.Errorf("%s -h lacks %q:\n%s", tt.name, tt.want, out)
		}
	}
	out, err := run([]string{"KVSELECT_THREADS=four"}, "kvselect")
	if want := `kvselect: environment variable KVSELECT_THREADS="four" (for --threads): want an integer`; err == nil || !strings.HasPrefix(out, want) {
		t.Errorf("invalid environment: %q, %v; want %q", out, err, want)
	}
}
