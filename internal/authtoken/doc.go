// Package authtoken holds a node's shared secrets (SPEC §11): the bearer
// token that protects the HTTP API, that the node sends on its own calls to
// other nodes, and from which replica sync derives the key of its message
// authentication codes; and, in a Holder of its own, the selection token
// (--selection-token-file), which the HTTP API accepts on the routes a
// Ray caller needs.
//
// One Holder is shared by all of those parts. Each reads the token when it
// uses it, so a rotation (SIGHUP re-reads the files) reaches every part at
// once without a restart.
//
// A token file holds one token, or two during a rotation, one a line: the
// node sends and signs with the first and accepts both (Secret.Accepts),
// in HTTP and in replica sync alike. That is what makes a rotation
// outage-free node by node: "old\nnew" on every node, then "new\nold",
// then "new", each with a SIGHUP; at every step every node accepts what
// every other sends. A Holder also keeps the token it replaced and when
// (Previous, Rotated), for a part that chooses to accept it for a grace
// (zmqsync's PreviousTokenGrace; kvselect itself turns that off and
// relies on the file's second line).
//
// ReadFile is the one place a token file is read and checked, at start-up
// and on every reload alike, by the server and by the clients (kvselectctl,
// kvsim), which send the first line.
package authtoken
