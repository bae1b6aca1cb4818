package localcluster

import (
	"context"
	"errors"
	"net"
	"testing"

	"github.com/kvselect/kvselect/server"
)

func Test_StartConvergesAndStops(t *testing.T) {
	c, err := Start(context.Background(), 2, t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	leader, err := Converged(c.Nodes)
	if err != nil || leader == nil {
		t.Fatalf("after Start: leader %v, %v", leader, err)
	}
	if urls := c.URLs(); len(urls) != 2 || urls[1] != "http://"+c.Nodes[1].Addr() {
		t.Fatalf("URLs = %v", urls)
	}
	if err := Stop(context.Background(), c.Nodes); err != nil {
		t.Fatal(err)
	}
}

// A node that cannot start fails Start, and the node that did start is
// stopped: its HTTP port is free again.
func Test_StartFailureStopsTheRest(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	free, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	freeAddr := free.Addr().String()
	free.Close()
	_, err = Start(context.Background(), 2, t.TempDir(), func(i int, cfg *server.Config) {
		cfg.HTTPAddr = []string{freeAddr, taken.Addr().String()}[i]
	})
	if err == nil {
		t.Fatal("Start succeeded with n2's HTTP port taken")
	}
	ln, err := net.Listen("tcp", freeAddr)
	if err != nil {
		t.Fatalf("n1 still holds its HTTP port: %v", err)
	}
	ln.Close()
}

func Test_ConvergedWithoutLeader(t *testing.T) {
	if _, err := Converged([]*server.Server{nil}); !errors.Is(err, ErrNotConverged) {
		t.Fatalf("err = %v, want ErrNotConverged", err)
	}
}
