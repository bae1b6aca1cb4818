package zmqaddr

import (
	"fmt"
	"net"
	"strconv"
	"strings"
)

// Endpoint is a parsed ZMQ endpoint; Host and Port are set for tcp only.
type Endpoint struct {
	Transport  string // "tcp", "ipc" or "inproc"
	Host, Port string
}

// Parse splits ep into its transport and, for tcp, a host and a port of
// 1-65535. It does not judge the host (it may be empty, or "*", a bind
// address): each caller holds it to its own rule.
func Parse(ep string) (Endpoint, error) {
	transport, rest, ok := strings.Cut(ep, "://")
	if !ok || rest == "" {
		return Endpoint{}, fmt.Errorf("%q is not a ZMQ endpoint (want tcp://host:port, ipc://path or inproc://name)", ep)
	}
	switch transport {
	case "ipc", "inproc":
		return Endpoint{Transport: transport}, nil
	case "tcp":
		host, port, err := net.SplitHostPort(rest)
		if err != nil {
			return Endpoint{}, fmt.Errorf("%q: want tcp://host:port", ep)
		}
		if p, err := strconv.ParseUint(port, 10, 16); err != nil || p == 0 {
			return Endpoint{}, fmt.Errorf("%q: port must be 1-65535", ep)
		}
		return Endpoint{Transport: transport, Host: host, Port: port}, nil
	default:
		return Endpoint{}, fmt.Errorf("%q: unsupported transport %q (want tcp, ipc or inproc)", ep, transport)
	}
}
