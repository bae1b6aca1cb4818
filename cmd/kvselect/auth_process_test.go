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

	"github.com/kvselect/kvselect/api"
)

// Test_SIGHUPReloadsAuthToken runs a real kvselect with --auth-token-file
// and --selection-token-file, rewrites both files and sends SIGHUP, step
// by step through a two-line rotation: every token in a file is accepted,
// a token no longer in it is refused, without a restart. The selection
// token opens the selection routes and is 403 on a catalog write. A bad
// file on SIGHUP is logged and keeps the tokens; SIGTERM still shuts the
// node down cleanly.
func Test_SIGHUPReloadsAuthToken(t *testing.T) {
	dir := t.TempDir()
	admin, selection := filepath.Join(dir, "token"), filepath.Join(dir, "selection-token")
	write := func(path, content string) {
		t.Helper()
		if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(admin, "old-token\n")
	write(selection, "sel-old\n")
	c := startProcCluster(t, buildKvselect(t), 1, "--log-level", "info", "--auth-token-file", admin, "--selection-token-file", selection)
	c.nodes[0].token = "old-token"
	node := c.waitAgreement(30 * time.Second)
	status := func(token, method, path, body string) int {
		a, err := send(context.Background(), pollClient, method, node.url(path), body, api.HeaderAuthorization, api.Bearer(token))
		if err != nil {
			return 0
		}
		return a.status
	}
	// The answer each token gets on a catalog write and on a selection
	// route.
	type want struct{ write, read int }
	expect := func(what string, wants map[string]want) {
		t.Helper()
		c.eventually(what, 10*time.Second, func() error {
			for token, w := range wants {
				if got := status(token, "POST", "/workers", workerJSON(1)); got != w.write {
					return fmt.Errorf("POST /workers with %s: %d, want %d", token, got, w.write)
				}
				if got := status(token, "GET", "/loads", ""); got != w.read {
					return fmt.Errorf("GET /loads with %s: %d, want %d", token, got, w.read)
				}
			}
			return nil
		})
	}
	hup := func() {
		t.Helper()
		if err := node.Proc.Signal(syscall.SIGHUP); err != nil {
			t.Fatal(err)
		}
	}
	const ok, created, unauthorized, forbidden = http.StatusOK, http.StatusCreated, http.StatusUnauthorized, http.StatusForbidden
	expect("the tokens at start", map[string]want{
		"old-token": {created, ok}, "new-token": {unauthorized, unauthorized},
		"sel-old": {forbidden, ok}, "sel-new": {unauthorized, unauthorized},
	})

	write(admin, "old-token\nnew-token\n")
	write(selection, "sel-old\nsel-new\n")
	hup()
	both := map[string]want{"old-token": {created, ok}, "new-token": {created, ok}, "sel-old": {forbidden, ok}, "sel-new": {forbidden, ok}}
	expect("after SIGHUP both lines of each file are accepted", both)

	write(admin, "new-token\nold-token\n")
	write(selection, "sel-new\nsel-old\n")
	hup()
	expect("swapped, both lines are still accepted", both)

	write(admin, "new-token\n")
	write(selection, "sel-new\n")
	hup()
	c.nodes[0].token = "new-token"
	after := map[string]want{
		"old-token": {unauthorized, unauthorized}, "new-token": {created, ok},
		"sel-old": {unauthorized, unauthorized}, "sel-new": {forbidden, ok},
	}
	expect("once the files hold one line, the old tokens are refused", after)

	write(selection, "")
	hup()
	c.eventually("the failed reload is logged", 10*time.Second, func() error {
		raw, _ := os.ReadFile(node.logPath)
		if !strings.Contains(string(raw), "selection token reload failed") {
			return fmt.Errorf("not in %s", node.logPath)
		}
		return nil
	})
	expect("a bad file keeps the tokens", after)
	c.terminateAll(15 * time.Second)
}
