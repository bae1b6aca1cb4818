// Package zmqsync shares active load between selector nodes by replica
// sync (SPEC §3.6, seed 000): each node publishes the lifecycle of the
// reservations it sees over ZMQ PUB, subscribes to its peers, and applies
// their events to its own active load, so that every node's loads and cost
// function count every node's bookings.
//
// The events are the scheduler's (package scheduler/replica: Event, its
// kinds, live parts and wants): the scheduler builds what it publishes
// and decides what a peer's event does (Config.Apply, Forget, Live), and
// this package is their transport (encoding, order, freshness,
// authentication), importing those types and nothing of the scheduler.
//
// # Consistency
//
// Replica sync is best effort on the fast path, as seed 000's consistency
// invariants say, and self-healing within a few seconds behind it (SPEC
// §3.6):
//
//   - Events are not acknowledged and there is no backpressure: delays,
//     reordering across publishers, drops and temporary divergence of
//     active load between nodes are accepted, and a slow peer never holds
//     up booking or selection.
//   - Anti-entropy bounds the divergence. Every node publishes, each
//     period (1 s), its live booking set in the same ordered stream as its
//     events; a peer drops the mirrors the set no longer lists (a lost
//     free), asks for the admissions of those it lacks (a lost admission),
//     and sends again the free or prefill completion of a booking the
//     origin still lists though the peer ended it (see Anti-entropy).
//     Expiry (which runs from the booking time on every node) remains the
//     last bound.
//   - A node's mirrors of an earlier start of a member (an older epoch),
//     and of a member that left the cluster, are dropped as soon as the
//     catalog or the member's messages show it.
//   - Admissions, prefill completions and frees are synchronised. Output
//     blocks are not: they are frequent, and stay local to the node that
//     receives them.
//   - Events for an unknown model, tenant, worker or data-parallel rank, or
//     for a partition with another block size, are dropped and counted:
//     replica traffic never creates workers.
//   - A message is applied whole or not at all. A receiver drops (and
//     counts) any message that does not decode, including one in which a
//     single event is invalid, and any message its origin's state refuses
//     (see Acceptance).
//   - Reservation ids are global: once an admission has arrived, its id is
//     taken on the receiving node too.
//
// The transport (sockets, peers, queues and their limits) is described in
// sync.go; this comment defines what travels over it.
//
// # Wire format, schema v2
//
// Every replica-sync ZMQ message has two frames: the topic Topic
// ("kvselect.sync"), then one msgpack payload; a node with a token adds a
// third, the MAC frame (see Authentication). The payload is an array
//
//	[version, origin, cluster_id, epoch, counter, events]
//
//	version     uint    Version (2)
//	origin      str     the publishing node's id, 1 to MaxOriginLen bytes;
//	                    a node drops its own echoes
//	cluster_id  bin     16 bytes, not all zero: the cluster's id
//	                    (fsm.ClusterID, /cluster/status cluster_id)
//	epoch       uint    >= 1: the publisher's epoch (its start; the
//	                    member's epoch in the catalog)
//	counter     uint    >= 1: the message's number among the publisher's
//	                    messages of this epoch, from 1, one per message
//	events      array   0 to MaxEvents events, in the order they happened
//
// Every event is an array whose first element is its kind:
//
//	kind   uint  1 admission, 2 prefill_complete, 3 free, 4 live, 5 want
//
// Admission, prefill_complete and free are laid out as in v1 (below). A
// live event is one part of the publisher's live booking set:
//
//	[4, set, as_of, after, through, ids, prefilling]
//
//	set         uint           >= 1: the set's number in this epoch
//	as_of       uint           every admission the publisher sent in a
//	                           message numbered up to as_of is in the set,
//	                           unless it ended before the set was taken
//	after       str            "" or a reservation id: the part lists the
//	                           ids > after ("": from the first)
//	through     str            "" or a reservation id > after: and <=
//	                           through ("": to the last)
//	ids         array(str)     at most MaxSetIDs valid reservation ids,
//	                           strictly ascending (byte order), within
//	                           (after, through]: the publisher's own live
//	                           bookings there, not its mirrors
//	prefilling  array(uint)    strictly ascending indexes into ids of the
//	                           bookings whose prefill is not complete
//
// A set is one part (after and through ""), or parts of consecutive
// ranges, each part's after the through of the one before, sent in order.
// A want event asks a publisher to publish admissions again:
//
//	[5, target, target_epoch, ids]
//
//	target        str         the node asked, 1 to MaxOriginLen bytes
//	target_epoch  uint        >= 1: the target's epoch the ids belong to
//	ids           array(str)  1 to MaxSetIDs valid reservation ids
//
// Integers may take any msgpack integer encoding whose value is in range;
// the encoder writes the smallest. Strings are msgpack str, the cluster id
// a msgpack bin. Nothing may follow the payload's array in its frame.
// Test_AppendMessage_Golden pins v2 and v1 vectors (testdata/v2-*.bin,
// testdata/v1-*.bin); Test_DecodeMessage_HandWritten has vectors written
// from this comment.
//
// # Wire format, schema v1 (the previous release)
//
// The v1 payload is [1, origin, events]: no cluster id, epoch or counter,
// and only the kinds 1 to 3. Their layout, the same in v2:
//
//	[kind, reservation_id, ...]
//
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
// # Acceptance
//
// A receiver checks the frames and the MAC (Authentication), decodes the
// payload, then checks, in this order, counting each drop by reason in
// kvselect_replica_sync_dropped_messages_total (from unknown_origin on,
// and while it applies the events, with the origin's state locked,
// origin.go):
//
//   - echo: the origin is this node.
//   - not_ready (v2): this node does not know the cluster id yet.
//   - other_cluster (v2): the cluster id is not this node's.
//   - unknown_origin: the origin is not a member in this node's catalog
//     (a node that left more than Config.DepartedLinger ago, one that
//     joined and whose record has not reached this node yet, a stranger).
//     A node accepts messages of members only, and, for the linger, of a
//     member that left: it may not know yet that it was removed and still
//     answer its callers, so the prefill completions and frees it sends
//     of other nodes' bookings apply; its admissions, live sets, wants and
//     the ends of its own bookings are dropped (event reason
//     departed_member, departed.go).
//   - old_epoch (v2): the epoch is below the one this node accepts from
//     the origin: the catalog's epoch of the member, or a later one seen
//     in its messages (the catalog may lag a restart by a commit). A
//     message of a later epoch moves the origin to it, and this node
//     forgets every mirror of the earlier ones (Config.Forget) before
//     applying it; so does a later epoch in the catalog.
//   - replayed (v2): the counter is not above the highest this node has
//     accepted from the origin in its epoch. One PUB to one SUB keeps
//     order, so nothing valid arrives late; a message lost and delivered
//     again over a second subscription to the same node is a duplicate.
//     Gaps are counted (kvselect_replica_sync_missed_messages_total) and
//     left to anti-entropy.
//   - old_version (v1): the origin runs this release (its catalog record
//     has an epoch, or this node has accepted v2 from it): v1 in its name
//     is a capture sent again, or a copy its dual publishing made for
//     others (see Versions).
//
// So a captured message sent again books nothing: its counter was seen,
// or it belongs to an epoch the origin has left. What remains: a node that
// restarted has seen no counter of anyone; until it accepts the first
// message of an origin, a capture of that origin's current epoch would
// pass, and the origin's next live set (at most a period later) drops
// what it booked.
//
// Wants are applied only by their target, in its current epoch; other
// receivers skip them.
//
// # Anti-entropy
//
// Every AntiEntropyPeriod (1 s) a node with an epoch reads the counter of
// the last message whose events its sender had taken off the queue
// (as_of), then takes its live set (Config.Live: its own bookings, with
// their prefill state) and queues it, split into parts, behind the events
// already queued. Ordering is what makes the set safe to act on: a booking
// admitted in a message numbered up to as_of was admitted before the set
// was taken, so the set lists it unless it ended (and then its free is in
// the stream too); a booking admitted later may be missing from the set,
// and its admission was sent in a message after as_of. A receiver
// (Config.Apply, the scheduler) therefore, for one origin and epoch:
//
//   - marks each listed mirror, completes its prefill when the origin
//     lists it as complete, and publishes its own prefill completion again
//     when it completed one the origin still lists as prefilling;
//   - asks the origin (a want) for listed bookings it does not mirror,
//     once per few seconds per booking (longer when it refused the
//     admission: an unknown rank, say); the origin publishes those
//     admissions again, with new counters;
//   - publishes again the free of a listed booking it freed itself (it
//     keeps such frees until the origin's set stops listing them, or their
//     expiry);
//   - on the part that completes a set whose every part arrived in order
//     (replica.LivePart.Complete), drops the origin's mirrors that this
//     set did not mark and that were booked from messages numbered up to
//     as_of.
//
// A lost free, from the origin or from any other node, and a lost
// admission thus heal within about two periods after the loss; a lost
// prefill completion too. A set whose part was lost drops nothing; the
// next one does. Each set also tells the receivers the publisher's counter
// every period, so a loss shows as a gap within a period. The set costs
// its publisher O(bookings) per period (Config.Live); its receivers
// O(bookings) per complete set and origin (scheduler/DESIGN.md).
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
// inject events. The MAC covers the payload byte for byte, and a v2
// payload carries the cluster id, the origin, its epoch and the counter:
// the MAC binds each message to its cluster and publisher and numbers it,
// so a holder of the token in another cluster (two clusters sharing a
// token) cannot pass its messages off as this cluster's, and a captured
// message is refused when sent again (see Acceptance). The key is derived
// from the token, not the token itself, so that the secret's two uses
// (bearer token, MAC key) stay apart; it is the same for v1 and v2 (their
// payloads differ from the first byte on). AppendMAC computes the frame;
// Test_AppendMAC_Vector pins a vector that openssl reproduces.
//
// What the MAC does not give: secrecy (anyone who reaches a PUB port can
// read the bookings it publishes).
//
// Rotation: a node signs with its token (Auth's Token: the first line of
// its token file) and accepts a MAC under either line of the file
// (authtoken.Secret.Also), so a token is rotated node by node with no
// message refused: first every node gets "old\nnew", then "new\nold",
// then "new" (README, Rotating a token). Besides, when the token changes
// a node still accepts the token it replaced for PreviousTokenGrace
// (default DefaultPreviousTokenGrace); kvselect turns that grace off
// (negative), so a node accepts exactly the tokens its file holds.
//
// Compatibility: without a token the wire has two frames. A node without a
// token ignores a MAC frame and accepts the message, so tokens can be
// given to nodes one at a time; a node with a token drops everything from
// nodes without one, and so do releases older than the MAC frame (they
// count three frames as reason "frames").
//
// # Versions
//
// Within a version a writer may append new optional fields at the end of
// the payload array or of an event array; readers skip elements they do
// not know, so fields are only ever added at the end, never removed,
// reordered or retyped. Anything else (a new event kind, a field whose
// meaning or type changes) takes a new version. A node drops every message
// whose version it does not read and counts it (ErrUnknownVersion).
//
// This release writes v2 and reads v1 and v2, for one release, so that a
// rolling upgrade from the release before keeps load shared both ways:
//
//   - A node sends v1 while its catalog has no cluster id: the id is
//     written by the first leader of this release, and a leader of the
//     previous release also refuses the incarnation that gives a node an
//     epoch (cluster/DESIGN.md), so until a node of this release leads,
//     every node speaks v1 (without anti-entropy, as before).
//   - Once the catalog has the id, a node sends nothing of its own until
//     its own epoch is in the catalog (a restart takes one commit; one in
//     a minority, as long as that lasts), then v2. Its prefill
//     completions, frees and live sets wait in the queue; its admissions
//     are not kept (the queue would pin the hashes of bookings long
//     ended: kvselect_replica_sync_held_admissions_total counts them),
//     and the peers ask for the live ones once its first live set
//     arrives.
//   - While a member that takes replica sync may run the previous release
//     (no epoch in the catalog, no v2 heard from it), a node also sends a
//     v1 copy of each admission, prefill completion and free (mode
//     "v2+v1"); such members drop the v2 messages as unknown_version, the
//     others drop the copies as old_version.
//   - A node accepts v1 only from members that may run the previous
//     release (Acceptance, old_version), with or without a token. The
//     trade-off: v1 has a MAC but no freshness, so during the upgrade the
//     messages of a node not yet upgraded can be replayed by whoever
//     captured them, as they could before this release; refusing them
//     would cut that node's load off from the others until it is
//     upgraded. Once a member has run this release, v1 in its name is
//     refused for good, with or without a token, and so is every v1
//     message once every member has.
//
// kvselect_replica_sync_previous_version_messages_total counts v1 received
// and v1 copies sent. The next release drops v1.
//
// DecodeMessage reports an unknown version with ErrUnknownVersion and
// everything else it refuses with ErrMalformed (an unknown event kind
// included).
//
// # Configuration
//
// Config (config.go) takes its defaults from DefaultConfig: Start fills
// every zero field from it, then refuses what Validate refuses (no node
// id or Apply, endpoints that are not tcp://host:port, negative periods)
// with ErrInvalidConfig.
package zmqsync
