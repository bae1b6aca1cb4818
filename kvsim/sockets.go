package kvsim

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"

	"github.com/go-zeromq/zmq4"
)

// routerBindAttempts bounds the search for n consecutive free ports.
const routerBindAttempts = 32

// errPortTaken marks a failure to bind one of the consecutive ports, which
// is worth retrying with another base port.
var errPortTaken = errors.New("kvsim: consecutive port taken")

// tcpEndpoint formats a ZMQ TCP endpoint.
func tcpEndpoint(host string, port int) string {
	return "tcp://" + net.JoinHostPort(host, strconv.Itoa(port))
}

// listen binds sock to host:port and returns the bound port.
func listen(sock zmq4.Socket, host string, port int) (int, error) {
	if err := sock.Listen(tcpEndpoint(host, port)); err != nil {
		return 0, err
	}
	addr, ok := sock.Addr().(*net.TCPAddr)
	if !ok {
		return 0, fmt.Errorf("kvsim: unexpected listener address %v", sock.Addr())
	}
	return addr.Port, nil
}

// listenPub binds a PUB socket on an OS-chosen port.
func listenPub(ctx context.Context, host string) (zmq4.Socket, int, error) {
	pub := zmq4.NewPub(ctx)
	if err := pub.SetOption(zmq4.OptionHWM, pubHWM); err != nil {
		_ = pub.Close()
		return nil, 0, fmt.Errorf("kvsim: set PUB high-water mark: %w", err)
	}
	port, err := listen(pub, host, 0)
	if err != nil {
		_ = pub.Close()
		return nil, 0, fmt.Errorf("kvsim: bind PUB: %w", err)
	}
	return pub, port, nil
}

// listenRouters binds n ROUTER sockets on consecutive ports P, P+1, ...,
// P+n-1, because a vLLM replay endpoint for dp rank r is the worker's
// replay endpoint with its port offset by r. It returns the sockets and P.
func listenRouters(ctx context.Context, host string, n int) ([]zmq4.Socket, int, error) {
	var lastErr error
	for range routerBindAttempts {
		socks, base, err := tryListenRouters(ctx, host, n)
		if err == nil {
			return socks, base, nil
		}
		if !errors.Is(err, errPortTaken) {
			return nil, 0, err
		}
		lastErr = err
	}
	return nil, 0, fmt.Errorf("kvsim: no %d consecutive free ports after %d attempts: %w", n, routerBindAttempts, lastErr)
}

func tryListenRouters(ctx context.Context, host string, n int) ([]zmq4.Socket, int, error) {
	first := zmq4.NewRouter(ctx)
	base, err := listen(first, host, 0)
	if err != nil {
		_ = first.Close()
		return nil, 0, fmt.Errorf("kvsim: bind ROUTER: %w", err)
	}
	socks := []zmq4.Socket{first}
	for i := 1; i < n; i++ {
		port := base + i
		sock := zmq4.NewRouter(ctx)
		if port > 65535 {
			err = fmt.Errorf("%w: port %d out of range", errPortTaken, port)
		} else if _, lerr := listen(sock, host, port); lerr != nil {
			err = fmt.Errorf("%w: %w", errPortTaken, lerr)
		}
		if err != nil {
			_ = sock.Close()
			closeAll(socks)
			return nil, 0, err
		}
		socks = append(socks, sock)
	}
	return socks, base, nil
}

func closeAll(socks []zmq4.Socket) {
	for _, s := range socks {
		_ = s.Close()
	}
}
