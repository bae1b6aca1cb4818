// Package jepsen will hold the fault-injection harness of SPEC §13: real
// kvselect processes behind per-link TCP proxies, faults (kill -9,
// SIGSTOP, partitions, latency, leader kill during writes, restart-all),
// concurrent catalog and selection clients, and a porcupine
// linearizability check of the catalog history.
//
// Not built yet: it arrives with the jepsen issue.
package jepsen
