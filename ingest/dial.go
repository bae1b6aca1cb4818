package ingest

import (
	"fmt"
	"net"
	"strings"
)

// ParseDial parses --kv-dial: comma-separated host:port=host:port pairs,
// each naming an address workers register (in a KV events or replay
// endpoint) and the address to dial for it instead. It exists for fault
// injection: the jepsen harness routes each node's worker links through
// proxies it controls, as --peer-dial does for the links between nodes.
func ParseDial(s string) (map[string]string, error) {
	out := map[string]string{}
	if strings.TrimSpace(s) == "" {
		return out, nil
	}
	for _, item := range strings.Split(s, ",") {
		from, to, ok := strings.Cut(strings.TrimSpace(item), "=")
		if !ok {
			return nil, fmt.Errorf("%q is not host:port=host:port", item)
		}
		for _, a := range []string{from, to} {
			if host, port, err := net.SplitHostPort(a); err != nil || host == "" || port == "" {
				return nil, fmt.Errorf("%q in %q is not host:port", a, item)
			}
		}
		if _, dup := out[from]; dup {
			return nil, fmt.Errorf("%s is mapped twice", from)
		}
		out[from] = to
	}
	return out, nil
}

// dialAddr is the endpoint to dial for a registered one: a tcp endpoint
// whose host:port Config.Dial maps is rewritten; every other is itself.
// Statuses and logs keep the registered endpoint.
func (m *Manager) dialAddr(endpoint string) string {
	if len(m.cfg.Dial) == 0 {
		return endpoint
	}
	addr, ok := strings.CutPrefix(endpoint, "tcp://")
	if !ok {
		return endpoint
	}
	if to, ok := m.cfg.Dial[addr]; ok {
		return "tcp://" + to
	}
	return endpoint
}
