package main

import (
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/kvselect/kvselect/client"
	"github.com/kvselect/kvselect/internal/authtoken"
)

// newClient builds the Go client from the global flags: the nodes of
// --addr, the token of --token or --token-file, the CA of --ca-file. The
// command's context bounds every request and retry by --timeout
// (env.startTimeout); RetryTimeout says the same to the client.
func newClient(g *globals) (*client.Client, error) {
	if g.timeout <= 0 {
		return nil, usageErrorf("--timeout must be positive, got %v", g.timeout)
	}
	addrs := strings.Split(g.addr, ",")
	token, err := g.bearer()
	if err != nil {
		return nil, err
	}
	c, err := client.New(client.Config{Addrs: addrs, Token: token, RetryTimeout: g.timeout, CAFile: g.caFile,
		HTTPClient: &http.Client{Transport: transport}})
	switch {
	case errors.Is(err, client.ErrCAFile):
		return nil, errors.New("--ca-file: " + strings.TrimPrefix(err.Error(), "client: "))
	case err != nil:
		return nil, usageErrorf("--addr: %s", strings.TrimPrefix(err.Error(), "client: "))
	}
	return c, nil
}

// transport carries the requests; nil is http.DefaultTransport. Tests
// wrap it to see each request's context.
var transport http.RoundTripper

// bearer is the token to send: --token, or the first line of
// --token-file (a node's two-line token file during a rotation will do).
func (g *globals) bearer() (string, error) {
	switch {
	case g.token != "" && g.tokenFile != "":
		return "", usageErrorf("give --token or --token-file, not both")
	case g.token != "":
		if err := authtoken.Validate(g.token); err != nil {
			return "", usageErrorf("--token: %v", err)
		}
		return g.token, nil
	case g.tokenFile != "":
		token, _, err := authtoken.ReadFile(g.tokenFile)
		if err != nil {
			return "", fmt.Errorf("--token-file: %w", err)
		}
		return token, nil
	}
	return "", nil
}
