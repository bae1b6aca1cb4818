package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net/http"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/kvselect/kvselect/api"
	"github.com/kvselect/kvselect/client"
	"github.com/kvselect/kvselect/internal/testpki"
)

// Test_TLSProcesses runs three real kvselect processes with
// --tls-cert-file, --tls-key-file and --tls-ca-file (a CA made for the
// test) and a token, as a deployment would: they agree on a leader and
// learn each other's HTTP addresses through metadata calls made over
// https, a write sent to a follower is forwarded to the leader over
// https, and SIGHUP makes a node serve a rewritten certificate.
func Test_TLSProcesses(t *testing.T) {
	dir := t.TempDir()
	ca := testpki.NewCA(t, dir, "procs")
	first := ca.Issue(t, "node") // loopback: one certificate serves the three
	token := dir + "/token"
	if err := os.WriteFile(token, []byte("s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	c := startProcCluster(t, buildKvselect(t), 3, "--tls-cert-file", first.CertFile, "--tls-key-file", first.KeyFile,
		"--tls-ca-file", ca.CertFile, "--auth-token-file", token)
	roots := x509.NewCertPool()
	pem, err := os.ReadFile(ca.CertFile)
	if err != nil || !roots.AppendCertsFromPEM(pem) {
		t.Fatalf("CA file: %v", err)
	}
	tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots}}
	t.Cleanup(tr.CloseIdleConnections)
	for _, n := range c.nodes {
		n.token, n.https = "s3cret", &http.Client{Timeout: time.Second, Transport: tr}
	}
	leader := c.waitAgreement(30 * time.Second)

	var follower *procNode
	for _, n := range c.nodes {
		if n != leader {
			follower = n
		}
	}
	kv, err := client.New(client.Config{Addrs: []string{follower.url("")}, Token: "s3cret", CAFile: ca.CertFile})
	if err != nil {
		t.Fatal(err)
	}
	var info client.ResponseInfo
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if _, err := kv.RegisterWorker(client.WithResponseInfo(ctx, &info), api.WorkerSpec{WorkerID: 1, ModelName: "m",
		Endpoint: "http://w1", BlockSize: 16, KVEventsEndpoints: map[uint32]string{0: "tcp://127.0.0.1:1"}}); err != nil {
		t.Fatalf("write through %s: %v", follower.id, err)
	}
	if info.ServedBy != leader.id {
		t.Fatalf("served by %q, want the leader %s", info.ServedBy, leader.id)
	}

	serial := func() string {
		conn, err := tls.Dial("tcp", follower.httpAddr, &tls.Config{RootCAs: roots})
		if err != nil {
			return err.Error()
		}
		defer conn.Close()
		return conn.ConnectionState().PeerCertificates[0].SerialNumber.String()
	}
	if got := serial(); got != first.Serial.String() {
		t.Fatalf("serves %s, want %s", got, first.Serial)
	}
	second := ca.Issue(t, "node") // rewrites the files every node reads
	if err := follower.Proc.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	c.eventually("after SIGHUP the node serves the new certificate", 10*time.Second, func() error {
		if got := serial(); got != second.Serial.String() {
			return fmt.Errorf("serves %s, want %s", got, second.Serial)
		}
		return nil
	})
	c.terminateAll(15 * time.Second)
}
