package client

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
)

// ErrCAFile is wrapped by every error about a CA file.
var ErrCAFile = errors.New("invalid CA file")

// maxCAFile bounds a CA file: a bundle of certificates, not a disk image.
const maxCAFile = 4 << 20

// TLSConfig returns the TLS configuration of a client that trusts the CA
// certificates in caFile (PEM) instead of the system's roots: how a
// client, kvselectctl or a node calling its peers (--tls-ca-file) verifies
// nodes whose certificates a cluster's own CA signed. It asks for TLS 1.2
// or later.
func TLSConfig(caFile string) (*tls.Config, error) {
	f, err := os.Open(caFile)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrCAFile, err)
	}
	defer f.Close()
	pem, err := io.ReadAll(io.LimitReader(f, maxCAFile+1))
	if err != nil {
		return nil, fmt.Errorf("%w: read %s: %w", ErrCAFile, caFile, err)
	}
	if len(pem) > maxCAFile {
		return nil, fmt.Errorf("%w: %s is larger than %d bytes", ErrCAFile, caFile, maxCAFile)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("%w: %s holds no PEM certificate", ErrCAFile, caFile)
	}
	return &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}, nil
}

// withTLS returns a copy of rt (nil: the default transport) that makes
// its TLS connections with tc.
func withTLS(rt http.RoundTripper, tc *tls.Config) (http.RoundTripper, error) {
	if rt == nil {
		rt = http.DefaultTransport
	}
	t, ok := rt.(*http.Transport)
	if !ok {
		return nil, fmt.Errorf("CAFile needs an *http.Transport, got a %T: set its TLS configuration yourself (TLSConfig)", rt)
	}
	t = t.Clone()
	t.TLSClientConfig = tc
	return t, nil
}
