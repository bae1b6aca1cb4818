package indexer

import (
	"encoding/binary"
	"fmt"
	"strings"

	"github.com/kvselect/kvselect/internal/msgpackx"
)

// MaxFrameBytes is the largest ZMQ frame a KV event listener accepts
// (SPEC §11); larger frames are dropped and counted.
const MaxFrameBytes = 64 << 20

// WireEvent is one KV cache event as an engine sent it, before the local
// block hashes are computed: the vLLM wire fields kvselect uses (SPEC §4).
// Slices alias the decoder's buffers and are valid until its next Decode.
type WireEvent struct {
	Kind      EventKind
	Hashes    []uint64 // block_hashes (engine hashes)
	HasParent bool
	Parent    uint64   // parent_block_hash
	Tokens    []uint32 // token_ids (BlockStored)
	BlockSize int64    // block_size (BlockStored); 0 when absent
	LoraName  string
	Medium    string // "" when absent or nil
	Tier      Tier   // the tier Medium maps to
}

// WireBatch is one decoded payload: [ts, events, data_parallel_rank].
type WireBatch struct {
	TS        float64
	Events    []WireEvent
	HasDPRank bool
	DPRank    uint32
	// Malformed counts events skipped because they could not be decoded;
	// Ignored counts events of a non-main attention group.
	Malformed int
	Ignored   int

	// Scratch for ApplyWire's conversion, kept across batches: a block's
	// tokens as bytes, the index events and their blocks.
	hbuf   []byte
	events []Event
	blocks []StoredBlock
}

// wireFields holds an event's fields while they are decoded, in either
// encoding. Token and hash ranges index the decoder's shared buffers.
type wireFields struct {
	kind                 string
	hashLo, hashHi       int
	tokLo, tokHi         int
	hasParent            bool
	parent               uint64
	blockSize            int64
	lora, medium, spec   string
	hasMedium, hasGroup  bool
	group                int64
	hasBlockSize, hasTok bool
}

// WireDecoder decodes KV event payloads. It reuses its buffers across
// calls, so one decoder serves one goroutine; the returned batch is valid
// until the next Decode.
type WireDecoder struct {
	r      msgpackx.Reader
	hashes []uint64
	tokens []uint32
	fields []wireFields
	batch  WireBatch
	// strs holds strings events repeat (event types, media, LoRA names,
	// cache spec kinds), so that decoding them allocates nothing once
	// they have been seen (intern); next is the slot replaced next.
	strs [16]string
	next int
}

// intern returns b as a string, a copy made only the first time: events
// repeat the same few strings, and a decoder on the ingestion hot path
// should not allocate per event. A hostile stream of distinct strings
// costs what copying each would anyway, plus a scan of the table.
func (d *WireDecoder) intern(b []byte) string {
	for _, s := range d.strs {
		if s == string(b) {
			return s
		}
	}
	s := string(b)
	d.strs[d.next] = s
	d.next = (d.next + 1) % len(d.strs)
	return s
}

// optStr reads a str or nil (returned as "", false), interned.
func (d *WireDecoder) optStr() (string, bool, error) {
	b, ok, err := d.r.OptBytes()
	if !ok {
		return "", ok, err
	}
	return d.intern(b), true, nil
}

// Decode decodes one msgpack payload. An error (wrapping
// ErrMalformedBatch) means the batch as a whole is unusable and must be
// dropped; events that are malformed on their own are skipped and counted
// in the batch instead.
func (d *WireDecoder) Decode(payload []byte) (*WireBatch, error) {
	d.r.Reset(payload)
	d.hashes, d.tokens, d.fields = d.hashes[:0], d.tokens[:0], d.fields[:0]
	b := &d.batch
	*b = WireBatch{Events: b.Events[:0], hbuf: b.hbuf, events: b.events, blocks: b.blocks}
	if err := d.decodeBatch(b); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrMalformedBatch, err)
	}
	if d.r.Remaining() != 0 {
		return nil, fmt.Errorf("%w: %d trailing bytes", ErrMalformedBatch, d.r.Remaining())
	}
	for i := range d.fields {
		ev, ok, ignored := d.event(&d.fields[i])
		switch {
		case ignored:
			b.Ignored++
		case !ok:
			b.Malformed++
		default:
			b.Events = append(b.Events, ev)
		}
	}
	return b, nil
}

func (d *WireDecoder) decodeBatch(b *WireBatch) error {
	r := &d.r
	if r.IsMap() {
		return d.decodeMapBatch(b)
	}
	n, err := r.ArrayLen()
	if err != nil {
		return err
	}
	if n < 2 {
		return fmt.Errorf("batch has %d elements, want at least 2", n)
	}
	if b.TS, err = d.optNumber(); err != nil {
		return err
	}
	if err := d.decodeEvents(); err != nil {
		return err
	}
	if n >= 3 {
		if err := d.dpRank(b); err != nil {
			return err
		}
	}
	for range n - 3 {
		if err := r.Skip(); err != nil {
			return err
		}
	}
	return nil
}

func (d *WireDecoder) decodeMapBatch(b *WireBatch) error {
	r := &d.r
	n, err := r.MapLen()
	if err != nil {
		return err
	}
	sawEvents := false
	for range n {
		key, err := r.Str()
		if err != nil {
			return err
		}
		switch string(key) {
		case "ts":
			b.TS, err = d.optNumber()
		case "events":
			err, sawEvents = d.decodeEvents(), true
		case "data_parallel_rank":
			err = d.dpRank(b)
		default:
			err = r.Skip()
		}
		if err != nil {
			return err
		}
	}
	if !sawEvents {
		return fmt.Errorf("batch map has no events")
	}
	return nil
}

func (d *WireDecoder) optNumber() (float64, error) {
	if d.r.NilNext() {
		return 0, nil
	}
	return d.r.Number()
}

func (d *WireDecoder) dpRank(b *WireBatch) error {
	if d.r.NilNext() {
		return nil
	}
	v, err := d.r.Int()
	if err != nil {
		return err
	}
	if v < 0 || v > int64(^uint32(0)) {
		return fmt.Errorf("data_parallel_rank %d out of range", v)
	}
	b.HasDPRank, b.DPRank = true, uint32(v)
	return nil
}

// decodeEvents reads the events array. An event that fails to decode is
// skipped (its fields are recorded with kind "" so it counts as
// malformed); only bytes that cannot even be skipped fail the batch.
func (d *WireDecoder) decodeEvents() error {
	r := &d.r
	n, err := r.ArrayLen()
	if err != nil {
		return err
	}
	for range n {
		start, hashes, tokens := r.Mark(), len(d.hashes), len(d.tokens)
		f := wireFields{}
		if err := d.decodeEvent(&f); err != nil {
			r.Rewind(start)
			d.hashes, d.tokens = d.hashes[:hashes], d.tokens[:tokens]
			if err := r.Skip(); err != nil {
				return err
			}
			f = wireFields{}
		}
		d.fields = append(d.fields, f)
	}
	return nil
}

func (d *WireDecoder) decodeEvent(f *wireFields) error {
	r := &d.r
	if r.IsMap() {
		n, err := r.MapLen()
		if err != nil {
			return err
		}
		for range n {
			key, err := r.Str()
			if err != nil {
				return err
			}
			if err := d.field(f, string(key)); err != nil {
				return err
			}
		}
		return nil
	}
	n, err := r.ArrayLen()
	if err != nil {
		return err
	}
	if n == 0 {
		return fmt.Errorf("empty event")
	}
	tag, err := r.Str()
	if err != nil {
		return err
	}
	f.kind = d.intern(tag)
	var order []string
	switch f.kind {
	case "BlockStored":
		order = storedFields
	case "BlockRemoved":
		order = removedFields
	}
	for i := 1; i < n; i++ {
		name := ""
		if i-1 < len(order) {
			name = order[i-1]
		}
		if err := d.field(f, name); err != nil {
			return err
		}
	}
	return nil
}

// Positional fields after the tag, as vLLM's msgspec array_like structs
// lay them out. Unnamed positions are skipped.
var (
	storedFields  = []string{"block_hashes", "parent_block_hash", "token_ids", "block_size", "", "medium", "lora_name", "", "group_idx", "kv_cache_spec_kind"}
	removedFields = []string{"block_hashes", "medium", "group_idx"}
)

// field decodes the value of one named event field into f; unknown names
// are skipped.
func (d *WireDecoder) field(f *wireFields, name string) error {
	r := &d.r
	var err error
	switch name {
	case "type":
		var s []byte
		s, err = r.Str()
		f.kind = d.intern(s)
	case "block_hashes":
		f.hashLo = len(d.hashes)
		err = d.hashList()
		f.hashHi = len(d.hashes)
	case "parent_block_hash":
		if !r.NilNext() {
			f.parent, err = d.hash()
			f.hasParent = true
		}
	case "token_ids":
		f.tokLo = len(d.tokens)
		err = d.tokenList()
		f.tokHi, f.hasTok = len(d.tokens), true
	case "block_size":
		if !r.NilNext() {
			f.blockSize, err = r.Int()
			f.hasBlockSize = true
		}
	case "medium":
		f.medium, f.hasMedium, err = d.optStr()
	case "lora_name":
		f.lora, _, err = d.optStr()
	case "group_idx":
		if !r.NilNext() {
			f.group, err = r.Int()
			f.hasGroup = true
		}
	case "kv_cache_spec_kind":
		f.spec, _, err = d.optStr()
	default:
		err = r.Skip()
	}
	return err
}

func (d *WireDecoder) hashList() error {
	n, err := d.r.ArrayLen()
	if err != nil {
		return err
	}
	for range n {
		h, err := d.hash()
		if err != nil {
			return err
		}
		d.hashes = append(d.hashes, h)
	}
	return nil
}

// hash reads an engine block hash: an unsigned or signed 64-bit integer
// (signed values reinterpreted bit for bit), or a binary whose last 8
// bytes are the hash, big-endian (vLLM's bytes hashes).
func (d *WireDecoder) hash() (uint64, error) {
	r := &d.r
	if r.IsBin() {
		b, err := r.StrOrBin(false)
		if err != nil {
			return 0, err
		}
		if len(b) == 0 {
			return 0, r.Fail("empty binary hash")
		}
		if len(b) >= 8 {
			return binary.BigEndian.Uint64(b[len(b)-8:]), nil
		}
		var pad [8]byte
		copy(pad[8-len(b):], b)
		return binary.BigEndian.Uint64(pad[:]), nil
	}
	v, _, err := r.Integer()
	return v, err
}

func (d *WireDecoder) tokenList() error {
	n, err := d.r.ArrayLen()
	if err != nil {
		return err
	}
	for range n {
		t, err := d.r.Uint32()
		if err != nil {
			return err
		}
		d.tokens = append(d.tokens, t)
	}
	return nil
}

// event turns decoded fields into a WireEvent. ok is false for an event
// that is malformed (unknown type, missing or inconsistent fields);
// ignored is true for an event of a non-main attention group.
func (d *WireDecoder) event(f *wireFields) (ev WireEvent, ok, ignored bool) {
	if (f.hasGroup && f.group != 0) || !mainAttention(f.spec) {
		return ev, false, true
	}
	tier, known := MediumTier(f.medium)
	if !known {
		return ev, false, false
	}
	ev.Tier, ev.Medium = tier, f.medium
	switch f.kind {
	case "BlockStored":
		if f.hashHi == f.hashLo || !f.hasTok || !f.hasBlockSize || f.blockSize <= 0 {
			return ev, false, false
		}
		n := int64(f.hashHi - f.hashLo)
		if int64(f.tokHi-f.tokLo) != n*f.blockSize {
			return ev, false, false
		}
		ev.Kind, ev.BlockSize, ev.LoraName = EventStored, f.blockSize, f.lora
		ev.HasParent, ev.Parent = f.hasParent, f.parent
		ev.Hashes, ev.Tokens = d.hashes[f.hashLo:f.hashHi:f.hashHi], d.tokens[f.tokLo:f.tokHi:f.tokHi]
	case "BlockRemoved":
		ev.Kind, ev.Hashes = EventRemoved, d.hashes[f.hashLo:f.hashHi:f.hashHi]
	case "AllBlocksCleared":
		ev.Kind = EventCleared
	default:
		return ev, false, false
	}
	return ev, true, false
}

// mainAttention reports whether a kv_cache_spec_kind names the model's
// main KV cache: full or MLA attention, or unspecified (older engines).
func mainAttention(kind string) bool {
	switch kind {
	case "", "full_attention", "mla_attention":
		return true
	}
	return false
}

// MediumTier maps an engine's medium to a storage tier (SPEC §4). The
// empty medium (absent or nil) is the device. known is false for a medium
// kvselect does not recognise.
func MediumTier(medium string) (t Tier, known bool) {
	switch strings.ToUpper(medium) {
	case "", "GPU":
		return TierDevice, true
	case "CPU", "CPU_PINNED", "CPU_TIER1":
		return TierHost, true
	case "DISK", "STORAGE", "CPU_TIER2", "SSD", "NVME", "SHARED_STORAGE", "EXTERNAL", "REMOTE":
		return TierDisk, true
	}
	return 0, false
}
