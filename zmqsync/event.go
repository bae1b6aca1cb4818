package zmqsync

import "time"

// Kind is what happened to a reservation on the node that publishes it.
type Kind uint8

// Event kinds. Output blocks are not synchronised: they are frequent and
// local by design (seed 000).
const (
	KindAdmission       Kind = 1 // a booking on the publishing node
	KindPrefillComplete Kind = 2 // its prefill ended (on any node)
	KindFree            Kind = 3 // it ended (on any node)
)

func (k Kind) String() string {
	switch k {
	case KindAdmission:
		return "admission"
	case KindPrefillComplete:
		return "prefill_complete"
	case KindFree:
		return "free"
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
}

// Message is what one PUB send carries: the events one node published
// since its last send, in order.
type Message struct {
	// Origin is the publishing node's id; a node drops its own echoes.
	Origin string
	Events []Event
}
