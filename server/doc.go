// Package server assembles one kvselect node from its parts: the Raft
// node and catalog (cluster, fsm), the prefix index (indexer) and the KV
// event listeners that feed it (ingest), selection and load accounting
// (scheduler), replica sync (zmqsync) and the HTTP API (http). It owns the
// construction order, the goroutines that run beside the parts, and a
// graceful shutdown.
//
// Start first fills the Config's zero fields that have a default and runs
// Config.Validate (config.go), which checks the node's own fields and
// calls each part's Validate, so that every caller, tests and kvbench
// included, gets the checks the flags get, before anything is bound. cmd/kvselect only turns flags into a Config and waits
// for a signal or for Removed (the node was removed from the cluster: it
// stops, as etcd's members do); tests build whole nodes in-process with
// the same code.
//
// At every start a node recovers its KV index (recovery.go): the KV event
// listeners are held while it loads another member's GET /dump (or an
// --indexer-peers URL's), and start afterwards from the dump's
// watermarks, replaying the rest from each worker. /ready reports
// recovering meanwhile, and /readyz?for=selection answers 503; Raft and
// HTTP never wait for it. It keeps asking while a member it reaches
// serves, and starts empty once every member it reaches is recovering too
// or empty, or after a bounded wait (recoveryrules.go states the rules).
//
// The node latches its first catch-up with a leader's commit index
// (readiness.go), which /readyz?for=selection, the pod readiness probe,
// needs: after it, losing the leader or the quorum does not make the node
// unready, since selection needs neither.
//
// The catalog's selection policies reach the scheduler with every change
// that touches them (policy.go), and a node that bootstrapped the cluster
// seeds the cluster default from --policy, once.
//
// Replica sync (replicasync.go) runs whenever the node has, or has had,
// a second member (SPEC §2; Config.ReplicaSync with Auto): from the start
// when --initial-cluster lists more than one member, the node joins, or
// its Raft state has more than one; for a node alone, from the first
// configuration with a second member (runReplicaSyncSwitch), never off
// again. Its endpoint goes into the node's catalog metadata, where the
// other members find it. One INFO line, "replica sync on" or "replica sync
// off", says which, where (bound and advertised endpoint) and why.
//
// The node's admin token lives in one authtoken.Holder shared by the HTTP
// check, the writes it forwards, the cluster's own calls and its Raft
// handshake, the recovery's /dump fetch and replica sync's MACs; the
// selection token in another,
// read by the HTTP check alone. ReloadAuthToken (SIGHUP, through Reload)
// reads both token files for all of them at once; a file's two lines make
// a rotation outage-free (auth.go). With a certificate the node serves
// HTTPS and calls the others over https (tls.go).
package server
