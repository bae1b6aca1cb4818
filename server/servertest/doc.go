// Package servertest starts whole kvselect nodes in-process for tests, the
// way net/http/httptest starts servers: loopback listeners on OS-chosen
// ports, fast Raft timeouts, and a stop registered with the test.
// Clusters come from server/localcluster, the launcher kvbench's routing
// replay shares; this package adds what a test needs on top: the cleanup,
// stop, crash, restart and add of single nodes, and a failure instead of
// an error.
package servertest
