// Command kvselectctl is the admin and inspection CLI of a kvselect
// cluster. It talks HTTP to any node:
//
//	kvselectctl [global flags] <command> [args]
//
//	kvselectctl cluster status
//	kvselectctl --addr n1:8092,n2:8092 workers add --id 1 --model llama --endpoint http://w1:8000 \
//	            --block-size 16 --kv-events tcp://w1:5557
//	kvselectctl workers add @worker.json
//	kvselectctl workers list --model llama
//	kvselectctl select --model llama --tokens 1,2,3,4
//	kvselectctl --json loads
//
// Reads (cluster status, workers list, select, loads, dump) go to the
// first address of --addr that answers. Writes (workers add, patch and
// rm; cluster join, remove and stepdown) and linearizable reads follow
// the leader themselves: the CLI asks a node for /cluster/status and sends
// the request straight to the leader it names, or to that node with
// ?redirect=true, following a 307 by hand with the same method, body and
// token. A write answered 503 not_leader or no_leader is retried, with
// backoff, for up to --timeout; a write answered unknown_outcome is never
// retried automatically, because only the user knows whether to repeat it
// (catalog writes are idempotent, so repeating is safe).
//
// Tables are for people; --json prints the server's JSON, indented.
// A server error prints "kvselectctl: <code>: <message> (HTTP <status>)"
// on stderr and exits 1; a usage error exits 2. Every global flag can also
// be set through the environment variable KVSELECT_<FLAG> (for example
// KVSELECT_ADDR or KVSELECT_TOKEN_FILE); the command line wins.
package main
