package api

import (
	"fmt"
	"github.com/kvselect/kvselect/internal/zmqaddr"
	"net"
	"net/url"
	"slices"
	"strconv"
	"strings"
)

// Worker addresses as a registration or a patch gives them. kvselect
// stores them and hands them on: endpoint to the caller of /select (Ray
// sends the request there), kv_events_endpoints and replay_endpoint to its
// own ZMQ listeners. A malformed one must be refused when it is written,
// with a 400 naming the field, not stored as schedulable and found out by
// whoever dials it.
//
// These checks run on requests only (CheckEndpoints, called by the HTTP
// layer before a write reaches the log), never in the catalog's apply:
// entries an older release accepted must still apply, identically, on
// every node.

// CheckEndpoints checks the addresses the body gives, by their wire names.
// An empty endpoint is accepted (it clears the field, and the worker is
// stored incomplete until it has one). The error is a *FieldError.
func (p *WorkerFields) CheckEndpoints() error {
	if p.Endpoint != nil && *p.Endpoint != "" {
		if err := CheckWorkerEndpoint(*p.Endpoint); err != nil {
			return &FieldError{Field: "endpoint", Problem: err.Error()}
		}
	}
	if p.KVEventsEndpoint != nil && *p.KVEventsEndpoint != "" {
		if err := CheckZMQEndpoint(*p.KVEventsEndpoint); err != nil {
			return &FieldError{Field: "kv_events_endpoint", Problem: err.Error()}
		}
	}
	if p.KVEventsEndpoints != nil {
		ranks := make([]uint32, 0, len(*p.KVEventsEndpoints))
		for r := range *p.KVEventsEndpoints {
			ranks = append(ranks, r)
		}
		slices.Sort(ranks) // with several bad entries, always the same one
		for _, r := range ranks {
			if err := CheckZMQEndpoint((*p.KVEventsEndpoints)[r]); err != nil {
				return &FieldError{Field: fmt.Sprintf("kv_events_endpoints[%q]", strconv.FormatUint(uint64(r), 10)), Problem: err.Error()}
			}
		}
	}
	if p.ReplayEndpoint != nil && *p.ReplayEndpoint != "" {
		if err := CheckZMQEndpoint(*p.ReplayEndpoint); err != nil {
			return &FieldError{Field: "replay_endpoint", Problem: err.Error()}
		}
	}
	return nil
}

// CheckWorkerEndpoint accepts an absolute URL with a host:
// scheme://host[:port][/path][?query], such as http://worker:8000,
// https://worker-1.example:8443/v1 or kvsim's http://127.0.0.1:8094/workers/11
// and kvsim://host/workers/11. The scheme is the caller's business (any
// RFC 3986 scheme); the host is a DNS name or an IP literal ([...] for
// IPv6), in ASCII; the port, when given, is 1-65535. Spaces and control
// characters are refused anywhere.
func CheckWorkerEndpoint(ep string) error {
	if err := checkAddressText(ep); err != nil {
		return err
	}
	u, err := url.Parse(ep)
	if err != nil || u.Scheme == "" || u.Opaque != "" || u.Host == "" {
		return fmt.Errorf("%q is not a URL with a host: want scheme://host[:port][/path], e.g. http://worker:8000", ep)
	}
	if err := checkHost(u.Hostname()); err != nil {
		return fmt.Errorf("%q: %w", ep, err)
	}
	if strings.HasSuffix(u.Host, ":") || u.Port() != "" {
		if err := checkPort(u.Port()); err != nil {
			return fmt.Errorf("%q: %w", ep, err)
		}
	}
	return nil
}

// CheckZMQEndpoint accepts the ZMQ endpoints a listener can connect to:
// tcp://host:port (a DNS name or an IP literal, [...] for IPv6, and a port
// 1-65535), ipc://path and inproc://name, without spaces or control
// characters.
func CheckZMQEndpoint(ep string) error {
	if err := checkAddressText(ep); err != nil {
		return err
	}
	addr, err := zmqaddr.Parse(ep)
	if err != nil {
		return err
	}
	if addr.Transport == "tcp" {
		// A request must name a host a listener can resolve: not "*",
		// not empty.
		if err := checkHost(addr.Host); err != nil {
			return fmt.Errorf("%q: %w", ep, err)
		}
	}
	return nil
}

// checkAddressText refuses what no address holds: spaces, ASCII control
// characters and DEL (a pasted newline, a tab, a stray quote's neighbour).
func checkAddressText(ep string) error {
	for i := 0; i < len(ep); i++ {
		if c := ep[i]; c <= ' ' || c == 0x7f {
			return fmt.Errorf("%q has a space or control character at byte %d", ep, i)
		}
	}
	return nil
}

// checkHost accepts an IP literal or a DNS name: dot-separated labels of
// ASCII letters, digits, '-' and '_', none empty or longer than 63 bytes.
func checkHost(host string) error {
	if host == "" {
		return fmt.Errorf("the host is missing")
	}
	if net.ParseIP(host) != nil {
		return nil
	}
	if strings.Contains(host, ":") {
		return fmt.Errorf("host %q is not an IP address (write IPv6 literals in brackets)", host)
	}
	for label := range strings.SplitSeq(strings.TrimSuffix(host, "."), ".") {
		if label == "" || len(label) > 63 {
			return fmt.Errorf("host %q is not a valid host name", host)
		}
		for i := 0; i < len(label); i++ {
			c := label[i]
			if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '_') {
				return fmt.Errorf("host %q is not a valid host name (letters, digits, '-', '_' and dots; punycode for other scripts)", host)
			}
		}
	}
	return nil
}

// checkPort accepts a decimal port 1-65535.
func checkPort(port string) error {
	if p, err := strconv.ParseUint(port, 10, 16); err != nil || p == 0 {
		return fmt.Errorf("port %q must be a number from 1 to 65535", port)
	}
	return nil
}
