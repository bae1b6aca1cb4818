// Package zmqsync shares active load between selector nodes by replica
// sync (SPEC §3.6, seed 000): each node publishes the lifecycle of the
// reservations it sees over ZMQ PUB, subscribes to its peers, and applies
// their events to its own active load, so that every node's loads and cost
// function count every node's bookings.
//
// # Consistency
//
// Replica sync is bounded and best effort, as seed 000's consistency
// invariants say:
//
//   - There is no sequencing, acknowledgement, replay, backpressure or
//     resynchronisation. Delays, reordering, drops and temporary
//     divergence of active load between nodes are accepted; expiry
//     (which runs from the booking time on every node) bounds what a lost
//     free can leak.
//   - Admissions, prefill completions and frees are synchronised. Output
//     blocks are not: they are frequent, and stay local to the node that
//     receives them.
//   - Events for an unknown model, tenant, worker or data-parallel rank, or
//     for a partition with another block size, are dropped and counted:
//     replica traffic never creates workers.
//   - A message is applied whole or not at all. A receiver drops (and
//     counts) any message that does not decode, including one in which a
//     single event is invalid.
//   - Reservation ids are global: once an admission has arrived, its id is
//     taken on the receiving node too.
//
// The transport (sockets, peers, queues and their limits) is described in
// sync.go; this comment defines what travels over it.
//
// # Wire format, schema v1
//
// Every replica-sync ZMQ message has two frames: the topic Topic
// ("kvselect.sync"), then one msgpack payload; a node with a token adds a
// third, the MAC frame (see Authentication). The payload is an array
//
//	[version, origin, events]
//
//	version  uint    Version (1)
//	origin   str     the publishing node's id, 1 to MaxOriginLen bytes;
//	                 a node drops its own echoes
//	events   array   0 to MaxEvents events, in the order they happened
//
// Every event is an array whose first two elements are
//
//	[kind, reservation_id, ...]
//
//	kind             uint  1 admission, 2 prefill_complete, 3 free (Kind)
//	reservation_id   str   a valid reservation id (api.ValidateID)
//
// Prefill_complete and free may add one element:
//
//	booked_by          str or nil    the id of the node that booked the
//	                                 reservation (at most MaxOriginLen
//	                                 bytes); a receiver applies the event
//	                                 only to that node's booking of the
//	                                 id. Absent or nil: the id decides.
//
// An admission continues, in this order:
//
//	model              str           at most api.MaxNameLen bytes
//	tenant             str           at most api.MaxNameLen bytes
//	worker_id          uint64
//	dp_rank            uint32
//	block_size         uint32        > 0: the partition's block size on
//	                                 the booking node
//	sequence_hashes    array(uint64) at most api.MaxHashes (2^20)
//	chained            bool          the hashes were checked to chain the
//	                                 prompt's block hashes
//	isl                int64         1 to api.MaxISLTokens (2^32)
//	prefill_tokens     int64         0 to isl
//	admitted_unix_nano int64         the booking time, > 0
//
// Integers may take any msgpack integer encoding whose value is in range;
// the encoder writes the smallest. Strings are msgpack str. Nothing may
// follow the payload's array in its frame.
//
// # Authentication
//
// A node given a token (--auth-token-file, Config.Auth) sends every
// message with a third frame of MACSize (32) bytes:
//
//	key = HMAC-SHA256(token, "kvselect replica-sync v1")
//	mac = HMAC-SHA256(key, payload frame)
//
// and drops, counting them as reason "unauthenticated", received messages
// without that frame or whose MAC is not the payload's under its token
// (compared with hmac.Equal), before it decodes them. So only holders of
// the token can change its active load: a stranger who gets a node to
// follow its PUB (a registered endpoint, an address taken over) cannot
// inject events. The MAC covers the payload byte for byte, origin
// included. The key is derived from the token, not the token itself, so
// that the secret's two uses (bearer token, MAC key) stay apart. AppendMAC
// computes the frame;
// Test_AppendMAC_Vector pins a vector that openssl reproduces.
//
// What the MAC does not give: secrecy (anyone who reaches a PUB port can
// read the bookings it publishes) and freshness (a captured message can be
// sent again by whoever gets it followed; duplicate admissions are dropped
// while the reservation lives, and a replayed one otherwise expires with
// the admission time it carries).
//
// Rotation: when the token changes (SIGHUP re-reads the file), a node
// signs with the new token at once and, for PreviousTokenGrace (default
// DefaultPreviousTokenGrace) after the change, still accepts messages under
// the previous one, so nodes reloaded one after another keep receiving
// from those not reloaded yet. A node not reloaded yet drops what reloaded
// nodes send until it is: reload every node within the grace.
//
// Compatibility: without a token the wire is unchanged (two frames). A
// node without a token ignores a MAC frame and accepts the message, so
// tokens can be given to nodes one at a time; a node with a token drops
// everything from nodes without one, and so do releases older than the
// MAC frame (they count three frames as reason "frames").
//
// # Versions
//
// Within v1 a writer may append new optional fields at the end of the
// payload array or of an event array; v1 readers skip elements they do not
// know, so fields are only ever added at the end, never removed,
// reordered or retyped. Anything else (a new event kind, a field whose
// meaning or type changes) takes version 2. A node drops every message
// whose version it does not read and counts it (ErrUnknownVersion), so a
// rolling upgrade that changes the version loses replica sync between old
// and new nodes until every node reads the new version; a new version
// should therefore be read by one release before any node writes it.
//
// DecodeMessage reports an unknown version with ErrUnknownVersion and
// everything else it refuses with ErrMalformed (an unknown event kind
// included).
package zmqsync
