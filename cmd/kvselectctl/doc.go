// Command kvselectctl is the admin and inspection CLI of a kvselect
// cluster. It talks HTTP to any node:
//
//	kvselectctl [global flags] <command> [<subcommand>] [args] [flags]
//
//	kvselectctl cluster status
//	kvselectctl --addr n1:8092,n2:8092 workers add --id 1 --model llama --endpoint http://w1:8000 \
//	            --block-size 16 --kv-events tcp://w1:5557
//	kvselectctl workers add @worker.json
//	kvselectctl workers list --model llama
//	kvselectctl select --model llama --tokens 1,2,3,4
//	kvselectctl --json loads
//	kvselectctl cluster stepdown
//	source <(kvselectctl completion bash)
//
// Commands: cluster status|join|remove|stepdown, workers
// list|get|add|patch|rm|keepalive, select, reservations list|show
// (get)|free, loads, thresholds list|set|clear, policies
// list|set|delete, replica-sync status|peers, dump, completion
// bash|zsh|fish|powershell, help.
//
// # Command line
//
// The command tree is built with cobra (commands.go), as etcdctl's and
// kubectl's are. Every command and group answers --help (-h), and
// "kvselectctl help <command>" prints the same; the help goes to stdout.
// "kvselectctl completion <shell>" prints a completion script that
// completes commands, subcommands and flags. The global flags (--addr,
// --token-file, --token, --ca-file, --json, --timeout) are accepted
// before or after the command, flags and positional arguments may mix, and everything after
// "--" is positional. -name, with one dash, is still read as --name, as Go's
// flag package (the parser before cobra) read it. Every global flag can
// also be set through the environment variable KVSELECT_<FLAG> (for
// example KVSELECT_ADDR or KVSELECT_TOKEN_FILE); the command line wins.
//
// # Exit codes
//
//   - 0: success, --help and --version included.
//   - 1: the request failed or the server said no. A server error prints
//     "kvselectctl: <code>: <message> (HTTP <status>)" on stderr; no
//     node reachable, a failed step-down wait, an unreadable token file
//     print the cause.
//   - 2: the command line is wrong: an unknown command or flag (with
//     cobra's "Did you mean this?" suggestions, for flags too; a
//     misspelt command is named before the flags that follow it are
//     parsed, so "selct --model x" is an unknown command, not an unknown
//     flag), a missing subcommand, the wrong number of arguments, a bad
//     flag value or KVSELECT_* value, a malformed JSON argument. Stderr ends with
//     "Run 'kvselectctl <command> --help' for usage."
//
// # Output
//
// Tables are for people; --json prints the server's JSON, indented by two
// spaces, on stdout (dump --json too, to --out's file as well; without
// --json a dump is written as the server sends it, compact, as a node
// loads it). Errors and progress go to stderr only, so stdout stays
// machine-readable.
//
// # Leader following
//
// The CLI is built on the public Go client (package client), with its
// behaviour: every request goes to the first address of --addr that
// answers. Writes (workers add, patch and rm; thresholds set and clear;
// policies set and delete; cluster join, remove and stepdown) go through
// that node, which forwards them to the leader; when it answers that
// nothing was written (not_leader, no_leader), the client finds the
// leader through /cluster/status and writes there, retrying with backoff
// within --timeout. --timeout (default 10s) is one deadline for the whole
// command: every request, retry and wait, so "--timeout 6s" ends within
// 6 s even when an attempt is in flight. Once a node has answered
// no_leader (a node holds a write for its --leader-wait, 5 s by default,
// before it does), a line a second on stderr says the command still waits
// ("kvselectctl: waiting for a leader… (6s, no_leader)"), whatever the
// attempts do. A command that reaches its deadline prints "kvselectctl: no
// answer within --timeout 6s: <cause>" and exits 1. A catalog write
// whose outcome is unknown is sent again (catalog writes are idempotent);
// a step-down never is. Linearizable reads (--linearizable on workers
// list and get, thresholds list and policies list) are served by the
// leader. 307 redirects are followed by hand with the
// same method, body and token.
//
// cluster stepdown then asks the node for its status until it names a
// new leader (within the same --timeout), and prints the leader before and
// after; no new leader in time is an error (exit 1).
package main
