package zmqsync

import (
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/kvselect/kvselect/api"
	"github.com/kvselect/kvselect/internal/msgpackx"
	"github.com/kvselect/kvselect/scheduler/replica"
)

// The wire format of replica-sync messages; doc.go describes schemas v2
// and v1.
const (
	// Topic is the first frame of every replica-sync ZMQ message, the
	// subscription prefix of every subscriber.
	Topic = "kvselect.sync"
	// Version is the schema version this package writes.
	Version = 2
	// PreviousVersion is the schema of the release before, still read
	// (and written to members that may run it) for one release.
	PreviousVersion = 1

	// MaxEvents bounds the events of one message; a publisher with more
	// pending splits them over several messages.
	MaxEvents = 4096
	// MaxOriginLen bounds a message's origin (the publishing node's id).
	MaxOriginLen = api.MaxNameLen // the longest node id the catalog accepts
	// MaxSetIDs bounds the reservation ids of one live or want event; a
	// publisher with more splits its set over several events.
	MaxSetIDs = 4096
)

// minEventBytes is the size of the shortest valid event: a fixarray
// header, a fixint kind and a fixstr id of one byte.
const minEventBytes = 4

// minIDBytes is the size of the shortest valid id: a fixstr of one byte.
const minIDBytes = 2

var (
	// ErrMalformed is wrapped by every error of DecodeMessage except an
	// unknown version: bytes that are not a valid message of its version,
	// an unknown event kind, or a field out of range. When the bytes
	// themselves were not the expected msgpack the error wraps
	// msgpackx.ErrMalformed too, and a bad reservation id wraps
	// api.ErrBadID.
	ErrMalformed = errors.New("malformed replica-sync message")
	// ErrUnknownVersion reports a well-formed message of a schema version
	// this package does not read (neither Version nor PreviousVersion).
	ErrUnknownVersion = errors.New("unknown replica-sync message version")
)

// AppendMessage appends m, encoded in schema m.Version (Version when 0),
// to dst and returns the extended slice. Schema v1 has no header beyond
// the origin: m.ClusterID, Epoch and Counter are not written. It writes
// whatever m holds: a message that ValidateMessage rejects is encoded all
// the same, and every receiver drops it. With a dst of enough capacity it
// does not allocate, live and want events aside.
func AppendMessage(dst []byte, m *Message) []byte {
	if m.Version == PreviousVersion {
		dst = appendArrayLen(dst, 3)
		dst = appendUint(dst, PreviousVersion)
		dst = appendStr(dst, m.Origin)
	} else {
		dst = appendArrayLen(dst, 6)
		dst = appendUint(dst, Version)
		dst = appendStr(dst, m.Origin)
		dst = appendBin(dst, m.ClusterID[:])
		dst = appendUint(dst, m.Epoch)
		dst = appendUint(dst, m.Counter)
	}
	dst = appendArrayLen(dst, len(m.Events))
	for i := range m.Events {
		dst = appendEvent(dst, &m.Events[i])
	}
	return dst
}

func appendEvent(dst []byte, ev *replica.Event) []byte {
	switch ev.Kind {
	case replica.KindLive:
		return appendLive(dst, ev.Live)
	case replica.KindWant:
		return appendWant(dst, ev.Want)
	}
	if ev.Kind != replica.KindAdmission {
		if ev.BookedBy == "" {
			dst = appendArrayLen(dst, 2)
			dst = appendUint(dst, uint64(ev.Kind))
			return appendStr(dst, ev.ReservationID)
		}
		dst = appendArrayLen(dst, 3)
		dst = appendUint(dst, uint64(ev.Kind))
		dst = appendStr(dst, ev.ReservationID)
		return appendStr(dst, ev.BookedBy)
	}
	dst = appendArrayLen(dst, 12)
	dst = appendUint(dst, uint64(ev.Kind))
	dst = appendStr(dst, ev.ReservationID)
	dst = appendStr(dst, ev.Model)
	dst = appendStr(dst, ev.Tenant)
	dst = appendUint(dst, ev.WorkerID)
	dst = appendUint(dst, uint64(ev.DPRank))
	dst = appendUint(dst, uint64(ev.BlockSize))
	dst = appendArrayLen(dst, len(ev.SequenceHashes))
	for _, h := range ev.SequenceHashes {
		dst = appendUint(dst, h)
	}
	dst = appendBool(dst, ev.Chained)
	dst = appendInt(dst, ev.ISL)
	dst = appendInt(dst, ev.PrefillTokens)
	return appendInt(dst, ev.Admitted.UnixNano())
}

func appendLive(dst []byte, l *replica.LivePart) []byte {
	if l == nil {
		l = &replica.LivePart{}
	}
	dst = appendArrayLen(dst, 7)
	dst = appendUint(dst, uint64(replica.KindLive))
	dst = appendUint(dst, l.Set)
	dst = appendUint(dst, l.AsOf)
	dst = appendStr(dst, l.After)
	dst = appendStr(dst, l.Through)
	dst = appendStrs(dst, l.IDs)
	dst = appendArrayLen(dst, len(l.Prefilling))
	for _, i := range l.Prefilling {
		dst = appendUint(dst, uint64(i))
	}
	return dst
}

func appendWant(dst []byte, w *replica.Want) []byte {
	if w == nil {
		w = &replica.Want{}
	}
	dst = appendArrayLen(dst, 4)
	dst = appendUint(dst, uint64(replica.KindWant))
	dst = appendStr(dst, w.Target)
	dst = appendUint(dst, w.Epoch)
	return appendStrs(dst, w.IDs)
}

func appendStrs(dst []byte, ss []string) []byte {
	dst = appendArrayLen(dst, len(ss))
	for _, s := range ss {
		dst = appendStr(dst, s)
	}
	return dst
}

// DecodeMessage decodes one payload of schema v2 or v1 into m, reusing the backing
// arrays of m.Events and of their SequenceHashes: the decoded hash slices
// are valid until the next decode into the same m, so a receiver that keeps
// them copies them. Strings are never aliased to b.
//
// The message is accepted whole or not at all: any invalid event makes the
// whole message an error (wrapping ErrMalformed or ErrUnknownVersion), and
// m is then left empty. DecodeMessage never panics, and it sizes nothing
// from a count the input has not backed with bytes.
func DecodeMessage(b []byte, m *Message) error {
	var r msgpackx.Reader
	r.Reset(b)
	if err := decodeMessage(&r, m); err != nil {
		m.reset()
		return err
	}
	return nil
}

func (m *Message) reset() {
	m.Version, m.Origin, m.ClusterID, m.Epoch, m.Counter, m.Events = 0, "", ClusterID{}, 0, 0, m.Events[:0]
}

func decodeMessage(r *msgpackx.Reader, m *Message) error {
	n, err := r.ArrayLen()
	if err != nil {
		return malformed(err)
	}
	if n < 1 {
		return malformed(r.Fail("empty message array"))
	}
	v, err := r.Uint64()
	if err != nil {
		return malformed(err)
	}
	want := 6
	switch v {
	case Version:
	case PreviousVersion:
		want = 3
	default:
		return fmt.Errorf("%w: %d (this node reads %d and %d)", ErrUnknownVersion, v, PreviousVersion, Version)
	}
	if n < want {
		return malformed(r.Fail(fmt.Sprintf("v%d message array of %d elements, want at least %d", v, n, want)))
	}
	m.Version = int(v)
	origin, err := r.Str()
	if err != nil {
		return malformed(err)
	}
	if len(origin) == 0 || len(origin) > MaxOriginLen {
		return invalid("origin of %d bytes, want 1 to %d", len(origin), MaxOriginLen)
	}
	if m.Origin != string(origin) { // no allocation when the sender is the last one
		m.Origin = string(origin)
	}
	m.ClusterID, m.Epoch, m.Counter = ClusterID{}, 0, 0
	if v == Version {
		if err := decodeHeader(r, m); err != nil {
			return err
		}
	}
	if err := decodeEvents(r, m); err != nil {
		return err
	}
	if err := skipTrailing(r, n-want); err != nil {
		return err
	}
	if r.Remaining() != 0 {
		return malformed(r.Fail("bytes after the message"))
	}
	return nil
}

// decodeHeader reads what v2 adds after the origin: the cluster id, the
// publisher's epoch and the message's counter.
func decodeHeader(r *msgpackx.Reader, m *Message) error {
	id, err := r.StrOrBin(false)
	if err != nil {
		return malformed(err)
	}
	if len(id) != len(m.ClusterID) {
		return invalid("cluster id of %d bytes, want %d", len(id), len(m.ClusterID))
	}
	copy(m.ClusterID[:], id)
	if m.ClusterID.IsZero() {
		return invalid("zero cluster id")
	}
	if m.Epoch, err = r.Uint64(); err != nil {
		return malformed(err)
	}
	if m.Counter, err = r.Uint64(); err != nil {
		return malformed(err)
	}
	if m.Epoch == 0 || m.Counter == 0 {
		return invalid("epoch %d, counter %d: both start at 1", m.Epoch, m.Counter)
	}
	return nil
}

func decodeEvents(r *msgpackx.Reader, m *Message) error {
	n, err := r.ArrayLen()
	if err != nil {
		return malformed(err)
	}
	if n > MaxEvents {
		return invalid("%d events, at most %d", n, MaxEvents)
	}
	// The shortest event, [kind, "x"], takes minEventBytes: a count the
	// bytes cannot back is refused before the slice is sized from it.
	if n > r.Remaining()/minEventBytes {
		return malformed(r.Fail(fmt.Sprintf("%d events in %d bytes", n, r.Remaining())))
	}
	events := m.Events[:0]
	if cap(events) < n {
		events = make([]replica.Event, 0, n)
	}
	for i := 0; i < n; i++ {
		var old replica.Event
		if len(events) < cap(events) {
			old = events[:len(events)+1][len(events)]
		}
		prev := &old
		if i > 0 {
			prev = &events[i-1]
		}
		ev := replica.Event{SequenceHashes: old.SequenceHashes[:0], Epoch: m.Epoch, Counter: m.Counter}
		if err := decodeEvent(r, m.Version, &ev, &old, prev); err != nil {
			m.Events = events[:0]
			return fmt.Errorf("event %d: %w", i, err)
		}
		events = append(events, ev)
	}
	m.Events = events
	return nil
}

// decodeEvent decodes one event of a message of the given version into
// ev. old (the event this slot held before) and prev (the event before it)
// lend their strings when the bytes are equal, so a batch of one partition
// costs no allocation per model and tenant.
func decodeEvent(r *msgpackx.Reader, version int, ev, old, prev *replica.Event) error {
	n, err := r.ArrayLen()
	if err != nil {
		return malformed(err)
	}
	if n < 2 {
		return malformed(r.Fail(fmt.Sprintf("event array of %d elements, want at least 2", n)))
	}
	kind, err := r.Uint64()
	if err != nil {
		return malformed(err)
	}
	want := 2
	switch {
	case kind == uint64(replica.KindAdmission):
		want = 12
	case kind == uint64(replica.KindPrefillComplete), kind == uint64(replica.KindFree):
	case kind == uint64(replica.KindLive) && version == Version:
		want = 7
	case kind == uint64(replica.KindWant) && version == Version:
		want = 4
	default:
		return invalid("unknown event kind %d in a v%d message", kind, version)
	}
	if n < want {
		return malformed(r.Fail(fmt.Sprintf("%s event of %d elements, want at least %d", replica.Kind(kind), n, want)))
	}
	ev.Kind = replica.Kind(kind)
	switch ev.Kind {
	case replica.KindLive:
		if err := decodeLive(r, ev); err != nil {
			return err
		}
		return skipTrailing(r, n-want)
	case replica.KindWant:
		if err := decodeWant(r, ev); err != nil {
			return err
		}
		return skipTrailing(r, n-want)
	}
	id, err := r.Str()
	if err != nil {
		return malformed(err)
	}
	ev.ReservationID = string(id)
	if err := api.ValidateID(ev.ReservationID); err != nil {
		return fmt.Errorf("%w: reservation id: %w", ErrMalformed, err)
	}
	if ev.Kind == replica.KindAdmission {
		if err := decodeAdmission(r, ev, old, prev); err != nil {
			return err
		}
	} else if n > want {
		// The optional booked_by (str or nil) that follows a
		// prefill_complete's or a free's id.
		by, _, err := r.OptStr()
		if err != nil {
			return malformed(err)
		}
		if len(by) > MaxOriginLen {
			return invalid("booked_by of %d bytes, at most %d", len(by), MaxOriginLen)
		}
		ev.BookedBy = by
		want++
	}
	return skipTrailing(r, n-want)
}

// decodeAdmission decodes the ten fields that follow an admission's id.
func decodeAdmission(r *msgpackx.Reader, ev, old, prev *replica.Event) error {
	var err error
	if ev.Model, err = nameField(r, "model", old.Model, prev.Model); err != nil {
		return err
	}
	if ev.Tenant, err = nameField(r, "tenant", old.Tenant, prev.Tenant); err != nil {
		return err
	}
	if ev.WorkerID, err = r.Uint64(); err != nil {
		return malformed(err)
	}
	if ev.DPRank, err = r.Uint32(); err != nil {
		return malformed(err)
	}
	if ev.BlockSize, err = r.Uint32(); err != nil {
		return malformed(err)
	}
	if ev.BlockSize == 0 {
		return invalid("block size 0")
	}
	if err := decodeHashes(r, ev); err != nil {
		return err
	}
	if ev.Chained, err = r.Bool(); err != nil {
		return malformed(err)
	}
	if ev.ISL, err = r.Int(); err != nil {
		return malformed(err)
	}
	if ev.ISL < 1 || ev.ISL > api.MaxISLTokens {
		return invalid("isl %d, want 1 to %d", ev.ISL, int64(api.MaxISLTokens))
	}
	if ev.PrefillTokens, err = r.Int(); err != nil {
		return malformed(err)
	}
	if ev.PrefillTokens < 0 || ev.PrefillTokens > ev.ISL {
		return invalid("prefill tokens %d, want 0 to isl (%d)", ev.PrefillTokens, ev.ISL)
	}
	admitted, err := r.Int()
	if err != nil {
		return malformed(err)
	}
	if admitted <= 0 {
		return invalid("admission time %d ns, want after the Unix epoch", admitted)
	}
	ev.Admitted = time.Unix(0, admitted)
	return nil
}

// decodeLive decodes the six fields that follow a live event's kind.
func decodeLive(r *msgpackx.Reader, ev *replica.Event) error {
	l := &replica.LivePart{}
	var err error
	if l.Set, err = r.Uint64(); err != nil {
		return malformed(err)
	}
	if l.Set == 0 {
		return invalid("live set 0: sets are numbered from 1")
	}
	if l.AsOf, err = r.Uint64(); err != nil {
		return malformed(err)
	}
	if l.After, err = boundField(r, "after"); err != nil {
		return err
	}
	if l.Through, err = boundField(r, "through"); err != nil {
		return err
	}
	if l.After != "" && l.Through != "" && l.After >= l.Through {
		return invalid("live part after %q through %q is empty", l.After, l.Through)
	}
	if l.IDs, err = decodeIDs(r, "live"); err != nil {
		return err
	}
	for i, id := range l.IDs {
		switch {
		case i > 0 && id <= l.IDs[i-1]:
			return invalid("live ids not strictly ascending at %d", i)
		case l.After != "" && id <= l.After, l.Through != "" && id > l.Through:
			return invalid("live id %q outside (%q, %q]", id, l.After, l.Through)
		}
	}
	n, err := r.ArrayLen() // n <= the bytes that remain
	if err != nil {
		return malformed(err)
	}
	if n > len(l.IDs) {
		return invalid("%d prefilling entries for %d ids", n, len(l.IDs))
	}
	if n > 0 {
		l.Prefilling = make([]uint32, 0, n)
	}
	for range n {
		i, err := r.Uint32()
		if err != nil {
			return malformed(err)
		}
		if int(i) >= len(l.IDs) || len(l.Prefilling) > 0 && i <= l.Prefilling[len(l.Prefilling)-1] {
			return invalid("prefilling index %d: want ascending indexes below %d", i, len(l.IDs))
		}
		l.Prefilling = append(l.Prefilling, i)
	}
	ev.Live = l
	return nil
}

// decodeWant decodes the three fields that follow a want event's kind.
func decodeWant(r *msgpackx.Reader, ev *replica.Event) error {
	w := &replica.Want{}
	target, err := r.Str()
	if err != nil {
		return malformed(err)
	}
	if len(target) == 0 || len(target) > MaxOriginLen {
		return invalid("want target of %d bytes, want 1 to %d", len(target), MaxOriginLen)
	}
	w.Target = string(target)
	if w.Epoch, err = r.Uint64(); err != nil {
		return malformed(err)
	}
	if w.Epoch == 0 {
		return invalid("want of epoch 0")
	}
	if w.IDs, err = decodeIDs(r, "want"); err != nil {
		return err
	}
	if len(w.IDs) == 0 {
		return invalid("want without ids")
	}
	ev.Want = w
	return nil
}

// boundField reads a live part's bound: "" (open) or a reservation id.
func boundField(r *msgpackx.Reader, field string) (string, error) {
	b, err := r.Str()
	if err != nil {
		return "", malformed(err)
	}
	if len(b) == 0 {
		return "", nil
	}
	if err := api.ValidateID(string(b)); err != nil {
		return "", fmt.Errorf("%w: live %s: %w", ErrMalformed, field, err)
	}
	return string(b), nil
}

// decodeIDs reads an array of at most MaxSetIDs valid reservation ids.
func decodeIDs(r *msgpackx.Reader, what string) ([]string, error) {
	n, err := r.ArrayLen()
	if err != nil {
		return nil, malformed(err)
	}
	if n > MaxSetIDs {
		return nil, invalid("%d %s ids, at most %d", n, what, MaxSetIDs)
	}
	if n > r.Remaining()/minIDBytes {
		return nil, malformed(r.Fail(fmt.Sprintf("%d ids in %d bytes", n, r.Remaining())))
	}
	ids := make([]string, 0, n)
	for range n {
		b, err := r.Str()
		if err != nil {
			return nil, malformed(err)
		}
		id := string(b)
		if err := api.ValidateID(id); err != nil {
			return nil, fmt.Errorf("%w: %s id: %w", ErrMalformed, what, err)
		}
		ids = append(ids, id)
	}
	return ids, nil
}

func decodeHashes(r *msgpackx.Reader, ev *replica.Event) error {
	n, err := r.ArrayLen() // n <= the bytes that remain
	if err != nil {
		return malformed(err)
	}
	if n > api.MaxHashes {
		return invalid("%d sequence hashes, at most %d", n, api.MaxHashes)
	}
	hashes := ev.SequenceHashes[:0]
	if cap(hashes) < n {
		hashes = make([]uint64, 0, n)
	}
	for range n {
		h, err := r.Uint64()
		if err != nil {
			return malformed(err)
		}
		hashes = append(hashes, h)
	}
	ev.SequenceHashes = hashes
	return nil
}

// nameField reads a model or tenant name, returning one of the candidate
// strings instead of a new one when the bytes are equal.
func nameField(r *msgpackx.Reader, field string, cand1, cand2 string) (string, error) {
	b, err := r.Str()
	if err != nil {
		return "", malformed(err)
	}
	if len(b) > api.MaxNameLen {
		return "", invalid("%s of %d bytes, at most %d", field, len(b), api.MaxNameLen)
	}
	switch string(b) { // comparisons of string(b) do not allocate
	case cand1:
		return cand1, nil
	case cand2:
		return cand2, nil
	}
	return string(b), nil
}

// skipTrailing skips n elements a newer v1 writer appended.
func skipTrailing(r *msgpackx.Reader, n int) error {
	for range n {
		if err := r.Skip(); err != nil {
			return malformed(err)
		}
	}
	return nil
}

// ValidateMessage applies the checks DecodeMessage makes to a message
// about to be sent (in schema m.Version, Version when 0), so a publisher
// can refuse what every receiver would drop. It returns nil or an error
// wrapping ErrMalformed.
func ValidateMessage(m *Message) error {
	if len(m.Origin) == 0 || len(m.Origin) > MaxOriginLen {
		return invalid("origin of %d bytes, want 1 to %d", len(m.Origin), MaxOriginLen)
	}
	v2 := m.Version != PreviousVersion
	if v2 && (m.ClusterID.IsZero() || m.Epoch == 0 || m.Counter == 0) {
		return invalid("v2 header: cluster id %s, epoch %d, counter %d: none may be zero", m.ClusterID, m.Epoch, m.Counter)
	}
	if len(m.Events) > MaxEvents {
		return invalid("%d events, at most %d", len(m.Events), MaxEvents)
	}
	for i := range m.Events {
		if err := validateEvent(&m.Events[i], v2); err != nil {
			return fmt.Errorf("event %d: %w", i, err)
		}
	}
	return nil
}

func validateEvent(ev *replica.Event, v2 bool) error {
	switch ev.Kind {
	case replica.KindAdmission, replica.KindPrefillComplete, replica.KindFree:
	case replica.KindLive:
		if v2 {
			return validateLive(ev.Live)
		}
		return invalid("unknown event kind %d in a v1 message", ev.Kind)
	case replica.KindWant:
		if v2 {
			return validateWant(ev.Want)
		}
		return invalid("unknown event kind %d in a v1 message", ev.Kind)
	default:
		return invalid("unknown event kind %d", ev.Kind)
	}
	if err := api.ValidateID(ev.ReservationID); err != nil {
		return fmt.Errorf("%w: reservation id: %w", ErrMalformed, err)
	}
	if ev.Kind != replica.KindAdmission {
		if len(ev.BookedBy) > MaxOriginLen {
			return invalid("booked_by of %d bytes, at most %d", len(ev.BookedBy), MaxOriginLen)
		}
		return nil
	}
	switch {
	case len(ev.Model) > api.MaxNameLen:
		return invalid("model of %d bytes, at most %d", len(ev.Model), api.MaxNameLen)
	case len(ev.Tenant) > api.MaxNameLen:
		return invalid("tenant of %d bytes, at most %d", len(ev.Tenant), api.MaxNameLen)
	case ev.BlockSize == 0:
		return invalid("block size 0")
	case len(ev.SequenceHashes) > api.MaxHashes:
		return invalid("%d sequence hashes, at most %d", len(ev.SequenceHashes), api.MaxHashes)
	case ev.ISL < 1 || ev.ISL > api.MaxISLTokens:
		return invalid("isl %d, want 1 to %d", ev.ISL, int64(api.MaxISLTokens))
	case ev.PrefillTokens < 0 || ev.PrefillTokens > ev.ISL:
		return invalid("prefill tokens %d, want 0 to isl (%d)", ev.PrefillTokens, ev.ISL)
	case ev.Admitted.UnixNano() <= 0:
		return invalid("admission time %v, want after the Unix epoch", ev.Admitted)
	}
	return nil
}

func validateLive(l *replica.LivePart) error {
	if l == nil || l.Set == 0 {
		return invalid("live event without a set number")
	}
	for _, b := range []string{l.After, l.Through} {
		if b != "" {
			if err := api.ValidateID(b); err != nil {
				return fmt.Errorf("%w: live bound: %w", ErrMalformed, err)
			}
		}
	}
	if l.After != "" && l.Through != "" && l.After >= l.Through {
		return invalid("live part after %q through %q is empty", l.After, l.Through)
	}
	if len(l.IDs) > MaxSetIDs {
		return invalid("%d live ids, at most %d", len(l.IDs), MaxSetIDs)
	}
	for i, id := range l.IDs {
		if err := api.ValidateID(id); err != nil {
			return fmt.Errorf("%w: live id: %w", ErrMalformed, err)
		}
		switch {
		case i > 0 && id <= l.IDs[i-1]:
			return invalid("live ids not strictly ascending at %d", i)
		case l.After != "" && id <= l.After, l.Through != "" && id > l.Through:
			return invalid("live id %q outside (%q, %q]", id, l.After, l.Through)
		}
	}
	for j, i := range l.Prefilling {
		if int(i) >= len(l.IDs) || j > 0 && i <= l.Prefilling[j-1] {
			return invalid("prefilling index %d: want ascending indexes below %d", i, len(l.IDs))
		}
	}
	return nil
}

func validateWant(w *replica.Want) error {
	switch {
	case w == nil || len(w.Target) == 0 || len(w.Target) > MaxOriginLen:
		return invalid("want without a valid target")
	case w.Epoch == 0:
		return invalid("want of epoch 0")
	case len(w.IDs) == 0 || len(w.IDs) > MaxSetIDs:
		return invalid("want of %d ids, want 1 to %d", len(w.IDs), MaxSetIDs)
	}
	for _, id := range w.IDs {
		if err := api.ValidateID(id); err != nil {
			return fmt.Errorf("%w: want id: %w", ErrMalformed, err)
		}
	}
	return nil
}

// malformed wraps an error of the msgpack reader.
func malformed(err error) error { return fmt.Errorf("%w: %w", ErrMalformed, err) }

// invalid reports a well-formed field whose value is out of range.
func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrMalformed, fmt.Sprintf(format, args...))
}

// Msgpack writers: the smallest encoding of each value, as the msgpack
// spec recommends, so one message has exactly one encoding.

func appendArrayLen(dst []byte, n int) []byte {
	switch {
	case n < 16:
		return append(dst, 0x90|byte(n))
	case n <= math.MaxUint16:
		return append(dst, 0xdc, byte(n>>8), byte(n))
	}
	return append(dst, 0xdd, byte(n>>24), byte(n>>16), byte(n>>8), byte(n))
}

func appendStr(dst []byte, s string) []byte {
	switch n := len(s); {
	case n < 32:
		dst = append(dst, 0xa0|byte(n))
	case n <= math.MaxUint8:
		dst = append(dst, 0xd9, byte(n))
	case n <= math.MaxUint16:
		dst = append(dst, 0xda, byte(n>>8), byte(n))
	default:
		dst = append(dst, 0xdb, byte(n>>24), byte(n>>16), byte(n>>8), byte(n))
	}
	return append(dst, s...)
}

func appendBin(dst []byte, b []byte) []byte {
	switch n := len(b); {
	case n <= math.MaxUint8:
		dst = append(dst, 0xc4, byte(n))
	case n <= math.MaxUint16:
		dst = append(dst, 0xc5, byte(n>>8), byte(n))
	default:
		dst = append(dst, 0xc6, byte(n>>24), byte(n>>16), byte(n>>8), byte(n))
	}
	return append(dst, b...)
}

func appendUint(dst []byte, v uint64) []byte {
	switch {
	case v <= 0x7f:
		return append(dst, byte(v))
	case v <= math.MaxUint8:
		return append(dst, 0xcc, byte(v))
	case v <= math.MaxUint16:
		return append(dst, 0xcd, byte(v>>8), byte(v))
	case v <= math.MaxUint32:
		return append(dst, 0xce, byte(v>>24), byte(v>>16), byte(v>>8), byte(v))
	}
	return append(dst, 0xcf, byte(v>>56), byte(v>>48), byte(v>>40), byte(v>>32),
		byte(v>>24), byte(v>>16), byte(v>>8), byte(v))
}

func appendInt(dst []byte, v int64) []byte {
	switch {
	case v >= 0:
		return appendUint(dst, uint64(v))
	case v >= -32:
		return append(dst, byte(v)) // negative fixint
	case v >= math.MinInt8:
		return append(dst, 0xd0, byte(v))
	case v >= math.MinInt16:
		return append(dst, 0xd1, byte(v>>8), byte(v))
	case v >= math.MinInt32:
		return append(dst, 0xd2, byte(v>>24), byte(v>>16), byte(v>>8), byte(v))
	}
	return append(dst, 0xd3, byte(v>>56), byte(v>>48), byte(v>>40), byte(v>>32),
		byte(v>>24), byte(v>>16), byte(v>>8), byte(v))
}

func appendBool(dst []byte, v bool) []byte {
	if v {
		return append(dst, 0xc3)
	}
	return append(dst, 0xc2)
}
