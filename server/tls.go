package server

import (
	"crypto/tls"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"

	"github.com/kvselect/kvselect/client"
)

// HTTPS (SPEC §11). A node given a certificate serves its API over TLS
// only, and calls the other nodes over https: a cluster runs one scheme,
// so the node's own setting says which (member addresses in the catalog
// are host:port, without a scheme). --tls-ca-file names the CA the node
// trusts when it calls them (forwarding to the leader, the index
// recovery's /dump, join, metadata, the removal check), instead of the
// system's roots. The certificate and key are read again on SIGHUP
// (Reload); the CA file only at start.

// TLSConfig serves the HTTP API over HTTPS.
type TLSConfig struct {
	// CertFile and KeyFile hold the node's certificate (with its chain)
	// and private key, PEM. Both are required.
	CertFile, KeyFile string
	// CAFile, when set, holds the CA certificates (PEM) that sign the
	// other nodes' certificates; "" trusts the system's roots.
	CAFile string
}

// Validate checks what can be checked without reading the files: a
// certificate needs both a cert file and a key file (a CA file alone
// serves nothing).
func (c TLSConfig) Validate() error {
	if c.CertFile == "" || c.KeyFile == "" {
		return errNeedsCertAndKey
	}
	return nil
}

var errNeedsCertAndKey = fmt.Errorf("%w: a certificate needs both a cert file and a key file (--tls-cert-file, --tls-key-file)", ErrTLSConfig)

// ErrTLSConfig is wrapped by every error about the TLS configuration.
var ErrTLSConfig = errors.New("invalid TLS configuration")

// servingCert is the node's certificate, swapped whole on a reload; the
// TLS handshake reads it for every new connection.
type servingCert struct {
	certFile, keyFile string
	cur               atomic.Pointer[tls.Certificate]
}

func loadServingCert(certFile, keyFile string) (*servingCert, error) {
	if err := (TLSConfig{CertFile: certFile, KeyFile: keyFile}).Validate(); err != nil {
		return nil, err
	}
	c := &servingCert{certFile: certFile, keyFile: keyFile}
	if err := c.reload(); err != nil {
		return nil, err
	}
	return c, nil
}

// reload reads the certificate and key again; a pair that does not load
// keeps the current one.
func (c *servingCert) reload() error {
	cert, err := tls.LoadX509KeyPair(c.certFile, c.keyFile)
	if err != nil {
		return fmt.Errorf("%w: certificate %s, key %s: %w", ErrTLSConfig, c.certFile, c.keyFile, err)
	}
	c.cur.Store(&cert)
	return nil
}

func (c *servingCert) get(*tls.ClientHelloInfo) (*tls.Certificate, error) { return c.cur.Load(), nil }

// serverTLS is the TLS configuration the API is served with.
func (c *servingCert) serverTLS() *tls.Config {
	return &tls.Config{GetCertificate: c.get, MinVersion: tls.VersionTLS12}
}

// peerTLS returns the scheme of the node's calls to other nodes and their
// TLS configuration (nil: plain HTTP, or the system's roots).
func peerTLS(cfg *TLSConfig) (scheme string, tc *tls.Config, err error) {
	if cfg == nil {
		return "http", nil, nil
	}
	if cfg.CAFile == "" {
		return "https", nil, nil
	}
	if tc, err = client.TLSConfig(cfg.CAFile); err != nil {
		return "", nil, fmt.Errorf("%w: %w", ErrTLSConfig, err)
	}
	return "https", tc, nil
}

// checkPeerSchemes refuses, on a node that serves HTTPS, peer URLs given
// as plain http:// (--join, --indexer-peers): the node calls them with its
// admin token, which must not cross the network in clear text (SPEC §11).
// Bare host:port entries take the node's scheme and are fine.
func checkPeerSchemes(cfg *Config, scheme string) error {
	if scheme != "https" {
		return nil
	}
	for _, l := range []struct {
		flag string
		urls []string
	}{{"--join", cfg.Cluster.Join}, {"--indexer-peers", cfg.Recovery.Peers}} {
		for _, u := range l.urls {
			if strings.HasPrefix(strings.ToLower(strings.TrimSpace(u)), "http://") {
				return fmt.Errorf("%w: %s names %s, a plain http URL, on a node that serves HTTPS: the node would send it its admin token in clear text; use https:// or host:port",
					ErrTLSConfig, l.flag, u)
			}
		}
	}
	return nil
}
