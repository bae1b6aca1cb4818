package main

import (
	"bufio"
	"encoding/json"
	"io"
	"net/http"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/kvselect/kvselect/internal/childproc"
)

func Test_ParseSlotTrackerConfig(t *testing.T) {
	t.Run("defaults", func(t *testing.T) {
		cfg, err := parseSlotTrackerConfig(nil)
		if err != nil {
			t.Fatal(err)
		}
		if cfg.Addr != "0.0.0.0:8091" || cfg.ActiveRequestExpiry != 300*time.Second || cfg.Logger == nil {
			t.Fatalf("defaults = %+v", cfg)
		}
	})
	t.Run("environment and flags", func(t *testing.T) {
		t.Setenv("KVSELECT_PORT", "9000")
		t.Setenv("KVSELECT_BIND", "127.0.0.1")
		t.Setenv("DYN_ROUTER_ACTIVE_REQUEST_EXPIRY_SECS", "60")
		cfg, err := parseSlotTrackerConfig([]string{"--port", "9001"})
		if err != nil {
			t.Fatal(err)
		}
		if cfg.Addr != "127.0.0.1:9001" || cfg.ActiveRequestExpiry != time.Minute {
			t.Fatalf("config = %+v", cfg)
		}
	})
	for _, args := range [][]string{
		{"--active-request-expiry-secs", "0"},
		{"--active-request-expiry-secs", "NaN"},
		{"--active-request-expiry-secs", "1e300"},
		{"--port", "70000"},
		{"--log-format", "xml"},
		{"--data-dir", "x"}, // a node flag
		{"extra"},
	} {
		if _, err := parseSlotTrackerConfig(args); err == nil {
			t.Errorf("%q accepted", args)
		}
	}
}

// Test_SlotTrackerProcess runs `kvselect slot-tracker` as a process: it
// serves /health with an empty body and the API once it logs that it
// started, and exits 0 on SIGTERM.
func Test_SlotTrackerProcess(t *testing.T) {
	cmd := exec.Command(buildKvselect(t), "slot-tracker", "--bind", "127.0.0.1", "--port", "0", "--log-format", "json")
	cmd.Env = childproc.Env()
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	waiting, stopped := false, false // whether a goroutine waits for the process; whether it exited
	defer func() {
		if stopped {
			return
		}
		_ = cmd.Process.Kill()
		if waiting {
			<-exited
		} else {
			_ = cmd.Wait()
		}
	}()
	logs := bufio.NewScanner(stderr)

	// The listener is bound before "slot tracker started" is logged; the
	// line says where (port 0 lets the kernel pick, so nothing races for
	// a port).
	var addr string
	for addr == "" && logs.Scan() {
		var line struct{ Msg, HTTP string }
		if json.Unmarshal(logs.Bytes(), &line) == nil && line.Msg == "slot tracker started" {
			addr = line.HTTP
		}
	}
	if addr == "" {
		t.Fatalf("no start line in the log: %v", logs.Err())
	}
	waiting = true
	go func() {
		_, _ = io.Copy(io.Discard, stderr) // keep the pipe drained until exit
		exited <- cmd.Wait()
	}()
	base := "http://" + addr

	resp, err := http.Get(base + "/health")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || len(body) != 0 {
		t.Fatalf("/health: %d %q, want 200 with an empty body", resp.StatusCode, body)
	}
	for _, step := range []struct{ path, body string }{
		{"/register", `{"worker_id": 7, "model_name": "llama-3-8b", "block_size": 16, "dp_start": 0, "dp_size": 2}`},
		{"/add", `{"model_name": "llama-3-8b", "request_id": "req-123", "worker_id": 7, "dp_rank": 0, "sequence_hashes": [101, -22, 303], "new_isl_tokens": 48}`},
	} {
		resp, err := http.Post(base+step.path, "application/json", strings.NewReader(step.body))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusCreated {
			t.Fatalf("%s: %d, want 201", step.path, resp.StatusCode)
		}
	}

	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		stopped = true
		if err != nil {
			t.Fatalf("exit after SIGTERM: %v", err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("still running 15 s after SIGTERM")
	}
}
