// Package childproc holds what the harnesses that run real kvselect and
// kvsim processes (kvbench soak, jepsen) share: a child environment that
// leaves the command line in charge, and loopback ports reserved for the
// children.
package childproc
