package childproc

import (
	"net"
	"os"
	"strings"
)

// Env is this process's environment without the variables kvselect and
// kvsim read settings from (KVSELECT_*, DYN_*, KVSIM_*), so that a child's
// command line alone configures it.
func Env() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "KVSELECT_") && !strings.HasPrefix(kv, "DYN_") && !strings.HasPrefix(kv, "KVSIM_") {
			env = append(env, kv)
		}
	}
	return env
}

// ReservePorts returns n distinct free loopback TCP ports and the
// listeners holding them. The caller closes each listener just before a
// child binds its port, which keeps another reservation (or a proxy) from
// taking it meanwhile.
func ReservePorts(n int) ([]int, []net.Listener, error) {
	var ports []int
	var lns []net.Listener
	for range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			CloseAll(lns)
			return nil, nil, err
		}
		lns = append(lns, ln)
		ports = append(ports, ln.Addr().(*net.TCPAddr).Port)
	}
	return ports, lns, nil
}

// CloseAll closes listeners; closing one twice is harmless.
func CloseAll(lns []net.Listener) {
	for _, ln := range lns {
		ln.Close()
	}
}
