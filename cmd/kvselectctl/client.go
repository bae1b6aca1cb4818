package main

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"

	"github.com/kvselect/kvselect/client"
)

// maxTokenFile bounds the token file read.
const maxTokenFile = 64 << 10

// newClient builds the Go client from the global flags: the nodes of
// --addr, the token of --token-file, and --timeout for each request and
// for the retries of a leader-only one.
func newClient(g *globals) (*client.Client, error) {
	if g.timeout <= 0 {
		return nil, usageErrorf("--timeout must be positive, got %v", g.timeout)
	}
	addrs := strings.Split(g.addr, ",")
	token, err := readToken(g.tokenFile)
	if err != nil {
		return nil, err
	}
	c, err := client.New(client.Config{Addrs: addrs, Token: token, RetryTimeout: g.timeout,
		HTTPClient: &http.Client{Timeout: g.timeout}})
	if err != nil {
		return nil, usageErrorf("--addr: %s", strings.TrimPrefix(err.Error(), "client: "))
	}
	return c, nil
}

func readToken(path string) (string, error) {
	if path == "" {
		return "", nil
	}
	f, err := os.Open(path)
	if err != nil {
		return "", fmt.Errorf("--token-file: %w", err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxTokenFile))
	if err != nil {
		return "", fmt.Errorf("--token-file: %w", err)
	}
	token := strings.TrimSpace(string(data))
	if token == "" {
		return "", fmt.Errorf("--token-file: %s is empty", path)
	}
	return token, nil
}
