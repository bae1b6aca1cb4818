package replica

import (
	"math"
	"time"
)

// Kind is what happened to a reservation on the node that publishes it.
type Kind uint8

// Event kinds. Output blocks are not synchronised: they are frequent and
// local by design (seed 000).
const (
	KindAdmission       Kind = 1 // a booking on the publishing node
	KindPrefillComplete Kind = 2 // its prefill ended (on any node)
	KindFree            Kind = 3 // it ended (on any node)
	// KindLive (v2) is one part of the publisher's live booking set, its
	// anti-entropy announcement (zmqsync's doc.go, Anti-entropy).
	KindLive Kind = 4
	// KindWant (v2) asks a publisher to send the admissions of some of
	// its live bookings again: the receiver lacks them.
	KindWant Kind = 5
)

func (k Kind) String() string {
	switch k {
	case KindAdmission:
		return "admission"
	case KindPrefillComplete:
		return "prefill_complete"
	case KindFree:
		return "free"
	case KindLive:
		return "live"
	case KindWant:
		return "want"
	}
	return "unknown"
}

// Event is one lifecycle step of one reservation. PrefillComplete and Free
// carry the reservation id and the node that booked it; an admission
// carries what a receiver needs to book the same load: the partition, the
// worker rank, the prompt's sequence hashes, its length and prefill
// tokens, and when it was booked (expiry runs from then on every node).
type Event struct {
	Kind          Kind
	ReservationID string
	// BookedBy (PrefillComplete and Free) is the id of the node whose
	// booking this is, so that a receiver never ends a booking of its own
	// that happens to share the id (two nodes may book one id before
	// either admission arrives). "" when the publisher did not say: the
	// id alone decides, as before the field existed.
	BookedBy string

	// Admission only.
	Model, Tenant string
	WorkerID      uint64
	DPRank        uint32
	// BlockSize is the partition's block size on the booking node; a
	// receiver whose partition has another drops the admission.
	BlockSize      uint32
	SequenceHashes []uint64
	// Chained: the booking node checked that SequenceHashes chain the
	// prompt's block hashes (the scheduler's "verified" bookings, which
	// let it find active prefixes by bisection).
	Chained       bool
	ISL           int64
	PrefillTokens int64
	Admitted      time.Time

	// Live (KindLive) and Want (KindWant) carry anti-entropy; nil for the
	// other kinds.
	Live *LivePart
	Want *Want

	// Epoch and Counter are not written per event: the decoder copies
	// them from the message that carried the event (0 for a v1 message),
	// so that the receiver knows which start of the origin published it
	// and in which of its messages. On a live part waiting to be sent,
	// Epoch is the publisher's epoch when it took the set: the sender
	// drops a part of a set taken in another epoch.
	Epoch, Counter uint64
}

// LivePart is one part of a publisher's live booking set: the ids of its
// own bookings (not its mirrors) in (After, Through], sorted, as they were
// when the set was taken. A set too large for one event is split into
// parts of consecutive ranges, sent in order.
type LivePart struct {
	// Set numbers the publisher's sets within its epoch, from 1.
	Set uint64
	// AsOf is the counter of the last message the publisher had taken
	// off its queue when it took the set: every admission it sent in a
	// message numbered up to AsOf is listed unless it had ended. A
	// receiver therefore drops only mirrors booked from messages up to
	// AsOf; a later admission is never mistaken for a lost free.
	AsOf uint64
	// After and Through bound the ids: After < id <= Through; "" leaves
	// the bound open (the first part, the last part).
	After, Through string
	// IDs are the bookings, strictly ascending.
	IDs []string
	// Prefilling are the ascending indexes into IDs of the bookings whose
	// prefill is not complete.
	Prefilling []uint32
	// Complete is set by the receiver, never sent: this part ends a set
	// whose every part arrived, in order.
	Complete bool
}

// Want asks Target, in its epoch Epoch, to publish the admissions of IDs
// again: the sender lacks bookings that Target's live set lists.
type Want struct {
	Target string
	Epoch  uint64
	IDs    []string
}

// LiveBooking is one of this node's own live bookings, as the scheduler
// lists them for its live set (Scheduler.LiveBookings).
type LiveBooking struct {
	ID string
	// Prefilling: its prefill is not complete.
	Prefilling bool
}

// ForgetAll is the epoch a receiver forgets an origin before when the
// origin left the cluster: every mirror of it goes.
const ForgetAll = math.MaxUint64
