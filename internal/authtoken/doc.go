// Package authtoken holds a node's shared secret (SPEC §11): the bearer
// token that protects the HTTP API, that the node sends on its own calls to
// other nodes, and from which replica sync derives the key of its message
// authentication codes.
//
// One Holder is shared by all of those parts. Each reads the token when it
// uses it, so a rotation (SIGHUP re-reads --auth-token-file) reaches every
// part at once without a restart. A Holder keeps the token it replaced and
// when, so that a part that must tolerate peers which have not rotated yet
// (replica sync) can accept the previous token for a short grace; the HTTP
// check never does.
//
// ReadFile is the one place the token file is read and checked, at start-up
// and on every reload alike.
package authtoken
