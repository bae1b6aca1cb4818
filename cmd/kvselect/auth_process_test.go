package main

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Test_SIGHUPReloadsAuthToken runs a real kvselect with --auth-token-file,
// rewrites the file and sends SIGHUP: the old token is refused and the
// new one accepted, without a restart. A bad file on SIGHUP is logged and
// keeps the token; SIGTERM still shuts the node down cleanly.
func Test_SIGHUPReloadsAuthToken(t *testing.T) {
	path := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(path, []byte("old-token\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	c := startProcCluster(t, buildKvselect(t), 1, "--log-level", "info", "--auth-token-file", path)
	node := c.waitAgreement(30 * time.Second)
	status := func(token string, id uint64) int {
		req, err := http.NewRequestWithContext(context.Background(), http.MethodPost, node.url("/workers"), strings.NewReader(workerJSON(id)))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := pollClient.Do(req)
		if err != nil {
			return 0
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	expect := func(what string, want map[string]int) {
		t.Helper()
		c.eventually(what, 10*time.Second, func() error {
			for token, code := range want {
				if got := status(token, 1); got != code {
					return fmt.Errorf("%s: %d, want %d", token, got, code)
				}
			}
			return nil
		})
	}
	hup := func() {
		t.Helper()
		if err := node.cmd.Process.Signal(syscall.SIGHUP); err != nil {
			t.Fatal(err)
		}
	}
	expect("the token at start is accepted", map[string]int{"old-token": http.StatusCreated, "new-token": http.StatusUnauthorized})

	if err := os.WriteFile(path, []byte("new-token\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	hup()
	expect("after SIGHUP the new token is accepted and the old refused", map[string]int{"old-token": http.StatusUnauthorized, "new-token": http.StatusCreated})

	if err := os.WriteFile(path, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	hup()
	c.eventually("the failed reload is logged", 10*time.Second, func() error {
		raw, _ := os.ReadFile(node.logPath)
		if !strings.Contains(string(raw), "auth token reload failed") {
			return fmt.Errorf("not in %s", node.logPath)
		}
		return nil
	})
	expect("a bad file keeps the token", map[string]int{"old-token": http.StatusUnauthorized, "new-token": http.StatusCreated})
	c.terminateAll(15 * time.Second)
}
