// Package childproc is the process layer under the process harness
// (server/proccluster, which the kvbench soak, jepsen and cmd/kvselect's
// process tests use): a child process that can be started again, paused,
// signalled and stopped (Proc), a child environment that leaves the
// command line in charge, and loopback ports reserved for the children.
package childproc
