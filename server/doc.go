// Package server assembles one kvselect node from its parts: the Raft
// node and catalog (cluster, fsm), the prefix index (indexer), selection
// and load accounting (scheduler) and the HTTP API (http). It owns the
// construction order, the goroutines that run beside the parts, and a
// graceful shutdown. cmd/kvselect only turns flags into a Config and waits
// for a signal or for Removed (the node was removed from the cluster: it
// stops, as etcd's members do); tests build whole nodes in-process with
// the same code.
//
// At every start a node recovers its KV index (recovery.go): the KV event
// listeners are held while it loads another member's GET /dump (or the
// first --indexer-peers URL that answers), and start afterwards from the
// dump's watermarks, replaying the rest from each worker. /ready reports
// recovering meanwhile; Raft and HTTP never wait for it.
//
// The node's token lives in one authtoken.Holder shared by the HTTP
// check, the cluster's own calls, the recovery's /dump fetch and replica
// sync's MACs; SetAuthToken and ReloadAuthToken change it for all of them
// at once (auth.go).
package server
