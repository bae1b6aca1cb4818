// Package servertest starts whole kvselect nodes in-process for tests, the
// way net/http/httptest starts servers: loopback listeners on OS-chosen
// ports, fast Raft timeouts, and a stop registered with the test.
package servertest
