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
// It is built on the public Go client (package client), with its
// behaviour: every request goes to the first address of --addr that
// answers. Writes (workers add, patch and rm; cluster join, remove and
// stepdown) go through that node, which forwards them to the leader; when
// it answers that nothing was written (not_leader, no_leader), the client
// finds the leader through /cluster/status and writes there, retrying with
// backoff for up to --timeout. A catalog write whose outcome is unknown is
// sent again (catalog writes are idempotent); a step-down never is.
// Linearizable reads (workers list --linearizable) are served by the
// leader. 307 redirects are followed by hand with the same method, body
// and token.
//
// Tables are for people; --json prints the server's JSON, indented.
// A server error prints "kvselectctl: <code>: <message> (HTTP <status>)"
// on stderr and exits 1; a usage error exits 2. Every global flag can also
// be set through the environment variable KVSELECT_<FLAG> (for example
// KVSELECT_ADDR or KVSELECT_TOKEN_FILE); the command line wins.
package main
