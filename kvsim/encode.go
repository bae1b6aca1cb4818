package kvsim

import (
	"bytes"
	"fmt"

	"github.com/vmihailenco/msgpack/v5"
)

// eventKind tags the three KV events the simulator emits.
type eventKind uint8

const (
	kindStored eventKind = iota
	kindRemoved
	kindCleared
)

// medium is the storage tier every simulated block lives on.
const medium = "GPU"

// event is one KV event before encoding. Only the fields of its kind are
// meaningful.
type event struct {
	kind      eventKind
	hashes    []uint64 // stored and removed
	parent    uint64   // stored, when hasParent
	hasParent bool
	tokens    []uint32 // stored: every token of the stored blocks
	blockSize int      // stored
}

// batchEncoder encodes batches in vLLM's wire format. It is not safe for
// concurrent use; each rank owns one under its mutex.
type batchEncoder struct {
	encoding Encoding
	buf      bytes.Buffer
	enc      *msgpack.Encoder
}

func newBatchEncoder(encoding Encoding) *batchEncoder {
	b := &batchEncoder{encoding: encoding}
	b.enc = msgpack.NewEncoder(&b.buf)
	return b
}

// encode returns a fresh payload [ts, [events...], dpRank]. Integer widths
// follow vLLM's msgspec output: hashes are always uint64 (0xcf), tokens,
// block size and rank use the most compact form.
func (b *batchEncoder) encode(ts float64, events []event, dpRank int) ([]byte, error) {
	b.buf.Reset()
	e := b.enc
	if err := e.EncodeArrayLen(3); err != nil {
		return nil, err
	}
	if err := e.EncodeFloat64(ts); err != nil {
		return nil, err
	}
	if err := e.EncodeArrayLen(len(events)); err != nil {
		return nil, err
	}
	for i := range events {
		if err := b.encodeEvent(&events[i]); err != nil {
			return nil, fmt.Errorf("kvsim: encode event %d: %w", i, err)
		}
	}
	if err := e.EncodeInt(int64(dpRank)); err != nil {
		return nil, err
	}
	return bytes.Clone(b.buf.Bytes()), nil
}

func (b *batchEncoder) encodeEvent(ev *event) error {
	var enc func(*msgpack.Encoder, *event) error
	switch {
	case ev.kind == kindStored && b.encoding == EncodingMap:
		enc = encodeStoredMap
	case ev.kind == kindStored:
		enc = encodeStoredArray
	case ev.kind == kindRemoved && b.encoding == EncodingMap:
		enc = encodeRemovedMap
	case ev.kind == kindRemoved:
		enc = encodeRemovedArray
	case ev.kind == kindCleared && b.encoding == EncodingMap:
		enc = encodeClearedMap
	case ev.kind == kindCleared:
		enc = encodeClearedArray
	default:
		return fmt.Errorf("unknown event kind %d", ev.kind)
	}
	return enc(b.enc, ev)
}

// encodeStoredArray writes vLLM's 8-field BlockStored: [tag, block_hashes,
// parent_block_hash, token_ids, block_size, lora_id, medium, lora_name].
func encodeStoredArray(e *msgpack.Encoder, ev *event) error {
	return firstErr(
		e.EncodeArrayLen(8),
		e.EncodeString("BlockStored"),
		encodeHashes(e, ev.hashes),
		encodeParent(e, ev),
		encodeTokens(e, ev.tokens),
		e.EncodeInt(int64(ev.blockSize)),
		e.EncodeNil(), // lora_id
		e.EncodeString(medium),
		e.EncodeNil(), // lora_name
	)
}

// encodeStoredMap writes BlockStored as a map with vLLM's key order.
func encodeStoredMap(e *msgpack.Encoder, ev *event) error {
	return firstErr(
		e.EncodeMapLen(8),
		e.EncodeString("type"), e.EncodeString("BlockStored"),
		e.EncodeString("block_hashes"), encodeHashes(e, ev.hashes),
		e.EncodeString("parent_block_hash"), encodeParent(e, ev),
		e.EncodeString("token_ids"), encodeTokens(e, ev.tokens),
		e.EncodeString("block_size"), e.EncodeInt(int64(ev.blockSize)),
		e.EncodeString("lora_id"), e.EncodeNil(),
		e.EncodeString("medium"), e.EncodeString(medium),
		e.EncodeString("lora_name"), e.EncodeNil(),
	)
}

// encodeRemovedArray writes ["BlockRemoved", block_hashes, medium].
func encodeRemovedArray(e *msgpack.Encoder, ev *event) error {
	return firstErr(
		e.EncodeArrayLen(3),
		e.EncodeString("BlockRemoved"),
		encodeHashes(e, ev.hashes),
		e.EncodeString(medium),
	)
}

// encodeRemovedMap writes {"type", "block_hashes", "medium"}.
func encodeRemovedMap(e *msgpack.Encoder, ev *event) error {
	return firstErr(
		e.EncodeMapLen(3),
		e.EncodeString("type"), e.EncodeString("BlockRemoved"),
		e.EncodeString("block_hashes"), encodeHashes(e, ev.hashes),
		e.EncodeString("medium"), e.EncodeString(medium),
	)
}

// encodeClearedArray writes ["AllBlocksCleared"].
func encodeClearedArray(e *msgpack.Encoder, _ *event) error {
	return firstErr(e.EncodeArrayLen(1), e.EncodeString("AllBlocksCleared"))
}

// encodeClearedMap writes {"type": "AllBlocksCleared"}.
func encodeClearedMap(e *msgpack.Encoder, _ *event) error {
	return firstErr(
		e.EncodeMapLen(1),
		e.EncodeString("type"), e.EncodeString("AllBlocksCleared"),
	)
}

func encodeHashes(e *msgpack.Encoder, hashes []uint64) error {
	if err := e.EncodeArrayLen(len(hashes)); err != nil {
		return err
	}
	for _, h := range hashes {
		if err := e.EncodeUint64(h); err != nil {
			return err
		}
	}
	return nil
}

func encodeParent(e *msgpack.Encoder, ev *event) error {
	if !ev.hasParent {
		return e.EncodeNil()
	}
	return e.EncodeUint64(ev.parent)
}

func encodeTokens(e *msgpack.Encoder, tokens []uint32) error {
	if err := e.EncodeArrayLen(len(tokens)); err != nil {
		return err
	}
	for _, t := range tokens {
		if err := e.EncodeUint(uint64(t)); err != nil {
			return err
		}
	}
	return nil
}

// firstErr returns the first non-nil error. Go evaluates the arguments in
// order, so the writes happen in the order listed.
func firstErr(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}
