package api

import (
	"bytes"
	"encoding/binary"
	"math"
	"math/bits"
	"strconv"
	"unicode/utf8"
)

// DecodeSelect decodes a /select or /select_and_reserve body as Decode
// does, with the same result and the same errors, but fast for the common
// shape: one flat object of the fields below with plain strings and
// integer arrays. Anything else it is unsure of — an escape, a null, a
// duplicate or unknown key, router_config_override, a value out of range,
// a syntax error — goes to Decode, which decides and words the error. A
// 2048-token prompt through encoding/json is three passes of its scanner
// over ~12 KB (find the object, skip the array, then our own array
// scan); here it is one.
//
// v should be zero but for v.TokenIDs: a slice with room for the prompt's
// tokens is decoded into (a caller may reuse buffers); token_ids absent
// from the body leaves v.TokenIDs nil all the same.
func DecodeSelect(body []byte, v *SelectRequest) error {
	buf := v.TokenIDs[:0]
	v.TokenIDs = nil
	if decodeFast(body, &v.Prompt, v, buf) {
		return nil
	}
	*v = SelectRequest{}
	return Decode(body, v)
}

// DecodePrompt is DecodeSelect for the routes that take a prompt alone
// (/overlap_scores, /potential_loads).
func DecodePrompt(body []byte, v *Prompt) error {
	buf := v.TokenIDs[:0]
	v.TokenIDs = nil
	if decodeFast(body, v, nil, buf) {
		return nil
	}
	*v = Prompt{}
	return Decode(body, v)
}

// Bits of the fields decodeFast has seen, to refuse a repeated key.
const (
	seenModel = 1 << iota
	seenTenant
	seenRoutingGroup
	seenBlockHashes
	seenSequenceHashes
	seenISL
	seenTokens
	seenLora
	seenMinIndex
	seenSelectionID
	seenReservationID
)

// decodeFast fills pr (and sel's own fields when sel is not nil) from
// body and reports whether it could decide alone. On false the caller
// starts over with Decode; what was filled is discarded.
func decodeFast(body []byte, pr *Prompt, sel *SelectRequest, tokBuf TokenIDs) bool {
	p := fastParser{b: body, tokBuf: tokBuf}
	p.ws()
	if !p.consume('{') {
		return false
	}
	p.ws()
	if p.consume('}') {
		return p.end()
	}
	seen := 0
	for {
		key, ok := p.plainString()
		if !ok {
			return false
		}
		p.ws()
		if !p.consume(':') {
			return false
		}
		p.ws()
		bit, ok := fastField(key, sel != nil)
		if !ok || seen&bit != 0 {
			return false
		}
		seen |= bit
		if !p.value(bit, pr, sel) {
			return false
		}
		p.ws()
		if p.consume(',') {
			p.ws()
			continue
		}
		if p.consume('}') {
			return p.end()
		}
		return false
	}
}

// fastField maps a key to its bit; false for a key decodeFast leaves to
// Decode (unknown, differently cased, or router_config_override).
func fastField(key string, selectBody bool) (int, bool) {
	switch key {
	case "model_name":
		return seenModel, true
	case "tenant_id":
		return seenTenant, true
	case "routing_group":
		return seenRoutingGroup, true
	case "block_hashes":
		return seenBlockHashes, true
	case "sequence_hashes":
		return seenSequenceHashes, true
	case "isl_tokens":
		return seenISL, true
	case "token_ids":
		return seenTokens, true
	case "lora_name":
		return seenLora, true
	case "min_catalog_index":
		return seenMinIndex, true
	case "selection_id":
		return seenSelectionID, selectBody
	case "reservation_id":
		return seenReservationID, selectBody
	}
	return 0, false
}

// value decodes the value of the field bit names.
func (p *fastParser) value(bit int, pr *Prompt, sel *SelectRequest) bool {
	switch bit {
	case seenModel, seenTenant, seenRoutingGroup, seenLora, seenSelectionID, seenReservationID:
		s, ok := p.plainString()
		if !ok {
			return false
		}
		switch bit {
		case seenModel:
			pr.ModelName = s
		case seenTenant:
			pr.TenantID = s
		case seenRoutingGroup:
			pr.RoutingGroup = s
		case seenLora:
			pr.LoraName = s
		default:
			if ValidateID(s) != nil {
				return false
			}
			if bit == seenSelectionID {
				sel.SelectionID = ID(s)
			} else {
				sel.ReservationID = ID(s)
			}
		}
		return true
	case seenTokens:
		toks, ok := p.tokenArray()
		pr.TokenIDs = toks
		return ok
	case seenBlockHashes:
		raw, ok := p.intArray()
		return ok && pr.BlockHashes.UnmarshalJSON(raw) == nil
	case seenSequenceHashes:
		raw, ok := p.intArray()
		return ok && pr.SequenceHashes.UnmarshalJSON(raw) == nil
	case seenISL:
		lit, ok := p.intLiteral()
		if !ok {
			return false
		}
		n, err := strconv.ParseInt(string(lit), 10, 64)
		pr.ISLTokens = n
		return err == nil
	case seenMinIndex:
		lit, ok := p.intLiteral()
		if !ok || lit[0] == '-' {
			return false
		}
		n, err := strconv.ParseUint(string(lit), 10, 64)
		pr.MinCatalogIndex = n
		return err == nil
	}
	return false
}

// fastParser walks a JSON document for decodeFast. Every method accepts
// only input whose meaning it is sure of, and reports false otherwise.
type fastParser struct {
	b []byte
	i int
	// tokBuf is decoded into when it has room for token_ids.
	tokBuf TokenIDs
}

func (p *fastParser) ws() {
	for p.i < len(p.b) {
		switch p.b[p.i] {
		case ' ', '\t', '\n', '\r':
			p.i++
		default:
			return
		}
	}
}

func (p *fastParser) consume(c byte) bool {
	if p.i < len(p.b) && p.b[p.i] == c {
		p.i++
		return true
	}
	return false
}

// end reports whether only whitespace follows.
func (p *fastParser) end() bool {
	p.ws()
	return p.i == len(p.b)
}

// plainString reads a string without escapes or control characters whose
// bytes are valid UTF-8 (encoding/json would replace invalid bytes).
func (p *fastParser) plainString() (string, bool) {
	if !p.consume('"') {
		return "", false
	}
	start, ascii := p.i, true
	for p.i < len(p.b) {
		c := p.b[p.i]
		switch {
		case c == '"':
			s := p.b[start:p.i]
			p.i++
			if !ascii && !utf8.Valid(s) {
				return "", false
			}
			return string(s), true
		case c == '\\' || c < 0x20:
			return "", false
		case c >= 0x80:
			ascii = false
		}
		p.i++
	}
	return "", false
}

// intLiteral reads a JSON integer: -?(0|[1-9][0-9]*), with no fraction
// or exponent after it.
func (p *fastParser) intLiteral() ([]byte, bool) {
	start := p.i
	p.consume('-')
	digits := p.i
	for p.i < len(p.b) && p.b[p.i] >= '0' && p.b[p.i] <= '9' {
		p.i++
	}
	n := p.i - digits
	if n == 0 || (n > 1 && p.b[digits] == '0') {
		return nil, false
	}
	if p.i < len(p.b) && (p.b[p.i] == '.' || p.b[p.i] == 'e' || p.b[p.i] == 'E') {
		return nil, false
	}
	return p.b[start:p.i], true
}

// intArray reads an array of JSON integers and returns it whole, for the
// checked types' UnmarshalJSON.
func (p *fastParser) intArray() ([]byte, bool) {
	start := p.i
	if !p.consume('[') {
		return nil, false
	}
	p.ws()
	if p.consume(']') {
		return p.b[start:p.i], true
	}
	for {
		if _, ok := p.intLiteral(); !ok {
			return nil, false
		}
		p.ws()
		if p.consume(']') {
			return p.b[start:p.i], true
		}
		if !p.consume(',') {
			return nil, false
		}
		p.ws()
	}
}

// tokenArray reads an array of token ids in one pass, as TokenIDs'
// UnmarshalJSON would decode it: each a JSON integer from 0 to 2^32-1, at
// most MaxHashes of them. Anything else (a minus sign, "-0" included, a
// fraction, a leading zero) is left to Decode.
func (p *fastParser) tokenArray() (TokenIDs, bool) {
	if !p.consume('[') {
		return nil, false
	}
	b := p.b
	// One allocation: the elements are at most the commas before the
	// first ']' plus one (a well-formed array has no ']' inside).
	end := bytes.IndexByte(b[p.i:], ']')
	if end < 0 {
		return nil, false // not an array; and sizing by MaxHashes would cost 4 MiB
	}
	n := min(bytes.Count(b[p.i:p.i+end], []byte{','})+1, MaxHashes)
	out := p.tokBuf[:0]
	if cap(out) < n || out == nil {
		out = make(TokenIDs, 0, n)
	}
	p.ws()
	if p.consume(']') {
		return out, true
	}
	i := p.i
	for {
		// The common case, inline: up to seven digits, no leading zero,
		// then ',' or ']' (seven digits cannot pass 2^32-1).
		if i+8 <= len(b) && len(out) < MaxHashes {
			x := binary.LittleEndian.Uint64(b[i:])
			if k := leadingDigits(x); k > 0 && k < 8 && (k == 1 || b[i] != '0') {
				switch b[i+k] {
				case ',':
					out = append(out, uint32(swarDigits(x, k)))
					i += k + 1
					continue
				case ']':
					out = append(out, uint32(swarDigits(x, k)))
					p.i = i + k + 1
					return out, true
				}
			}
		}
		if i < len(b) && isJSONSpace(b[i]) {
			for i < len(b) && isJSONSpace(b[i]) {
				i++
			}
		}
		v, next, ok := uint32At(b, i)
		if !ok || len(out) == MaxHashes {
			return nil, false
		}
		out = append(out, v)
		i = next
		if i < len(b) && isJSONSpace(b[i]) {
			for i < len(b) && isJSONSpace(b[i]) {
				i++
			}
		}
		if i >= len(b) {
			return nil, false
		}
		switch b[i] {
		case ',':
			i++
		case ']':
			p.i = i + 1
			return out, true
		default: // '.', 'e', 'E' or anything else
			return nil, false
		}
	}
}

func isJSONSpace(c byte) bool { return c == ' ' || c == '\n' || c == '\t' || c == '\r' }

// uint32At parses the JSON integer at b[i:] as a token id: 1 to 10
// digits, no leading zero, at most 2^32-1. It returns the value and the
// index after the digits.
func uint32At(b []byte, i int) (uint32, int, bool) {
	start := i
	var v uint64
	if i+8 <= len(b) {
		// Eight bytes at once: the number of leading digits, then their
		// value (SWAR, the digits' bytes in little-endian order).
		x := binary.LittleEndian.Uint64(b[i:])
		k := leadingDigits(x)
		if k == 0 {
			return 0, 0, false
		}
		v = swarDigits(x, k)
		i += k
	} else if i >= len(b) || b[i]-'0' > 9 {
		return 0, 0, false
	}
	for i < len(b) && b[i]-'0' <= 9 {
		v = v*10 + uint64(b[i]-'0')
		i++
		if i-start > 10 {
			return 0, 0, false
		}
	}
	if i-start > 1 && b[start] == '0' || v > math.MaxUint32 {
		return 0, 0, false
	}
	return uint32(v), i, true
}

// leadingDigits is how many of x's bytes, from the lowest, are ASCII
// digits before the first one that is not (0 to 8). A byte is a digit
// when its high nibble is 3 and its low nibble, plus 6, does not carry.
func leadingDigits(x uint64) int {
	const lo, hi = 0x0F0F0F0F0F0F0F0F, 0xF0F0F0F0F0F0F0F0
	notDigit := (x&hi ^ 0x3030303030303030) | ((x&lo + 0x0606060606060606) & hi)
	return bits.TrailingZeros64(notDigit) / 8
}

// swarDigits is the value of the first k (1 to 8) digit bytes of x: they
// are moved to the top, zero bytes in front counting as leading zeros,
// and combined pairwise, then in fours, then in eights.
func swarDigits(x uint64, k int) uint64 {
	x = (x & 0x0F0F0F0F0F0F0F0F) << (8 * (8 - k))
	x = (x * (10<<8 + 1)) >> 8 & 0x00FF00FF00FF00FF
	x = (x * (100<<16 + 1)) >> 16 & 0x0000FFFF0000FFFF
	return (x * (10000<<32 + 1)) >> 32
}
