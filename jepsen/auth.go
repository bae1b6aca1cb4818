package jepsen

import (
	"crypto/rand"
	"encoding/hex"

	"github.com/kvselect/kvselect/client"
	"github.com/kvselect/kvselect/server/proccluster"
)

// The suite runs with authentication on (SPEC §13): every node gets an
// admin token (--auth-token-file) with --auth-scope all, so every route
// but /health, /ready, /readyz and /openapi.json needs it, and the
// replica-sync MAC is keyed from it. Every request the harness makes
// (catalog, selection, lease and threshold clients, checkers, nemeses)
// carries the token, so forwarding with the caller's token, the MAC and
// authenticated index recovery all run under the faults.

// TokenFile is the token's file in the run directory (mode 0600).
const TokenFile = proccluster.TokenFile

// NewToken returns a random admin token: 32 bytes, hex.
func NewToken() (string, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return hex.EncodeToString(b), nil
}

// Endpoints are the nodes the workload and the checkers talk to, directly
// (never through a Link), and the token every request carries.
type Endpoints struct {
	URLs  []string
	Token string
}

// pinnedClients returns one client per node that talks to that node only,
// with the token.
func pinnedClients(ep Endpoints) ([]*client.Client, error) {
	out := make([]*client.Client, len(ep.URLs))
	for i, u := range ep.URLs {
		c, err := client.New(client.Config{Addrs: []string{u}, Pinned: true, Token: ep.Token})
		if err != nil {
			return nil, err
		}
		out[i] = c
	}
	return out, nil
}
