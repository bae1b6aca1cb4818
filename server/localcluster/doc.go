// Package localcluster starts kvselect nodes n1..nN inside one process on
// loopback: Raft listeners the OS chooses, an initial cluster they
// bootstrap together, and a wait until they agree on a leader and know
// each other. It is the one in-process launcher: server/servertest wraps
// it for tests (cleanup registered with testing.TB), and kvbench's routing
// replay uses it directly, for a binary rather than a test.
//
// It imports no testing code and starts nothing it does not stop: a
// failed Start stops what it started, and Stop stops every node still
// running.
package localcluster
