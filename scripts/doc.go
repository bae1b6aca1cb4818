// Package scripts holds the repository's shell scripts and, in its tests,
// checks that run them: run-demo.sh (make run) must parse, bring up its
// cluster, survive the stop of any one node so that an operator can try a
// failover, and stop everything it started when it is told to; and
// fuzz.sh (make fuzz) must find every fuzz target of the module.
package scripts
