package msgpackx

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
)

// ErrMalformed reports bytes that are not the msgpack value the decoder
// expected. Every error of a Reader wraps it.
var ErrMalformed = errors.New("malformed msgpack")

// Reader is a bounds-checked cursor over msgpack bytes. It never
// allocates (but for OptStr, which returns a string): strings and
// binaries are returned as sub-slices of the input,
// and every length read from the input is checked against the bytes that
// remain before anyone sizes a slice with it. Skip is iterative, so
// nesting depth costs no stack. The zero Reader reads nothing; Reset gives
// it bytes.
type Reader struct {
	b   []byte
	off int
}

// Reset makes r read b from its start.
func (r *Reader) Reset(b []byte) { r.b, r.off = b, 0 }

// Remaining is the number of bytes not read yet.
func (r *Reader) Remaining() int { return len(r.b) - r.off }

// Mark returns the current position, for Rewind.
func (r *Reader) Mark() int { return r.off }

// Rewind goes back to a position Mark returned, so that a value that
// failed to decode can be read again (or skipped) from its start.
func (r *Reader) Rewind(mark int) {
	if mark >= 0 && mark <= r.off {
		r.off = mark
	}
}

// Fail returns an ErrMalformed error that says what was wrong and where.
func (r *Reader) Fail(what string) error {
	return fmt.Errorf("%w: %s at byte %d", ErrMalformed, what, r.off)
}

func (r *Reader) peek() (byte, error) {
	if r.off >= len(r.b) {
		return 0, r.Fail("unexpected end")
	}
	return r.b[r.off], nil
}

// next returns the next n bytes and advances past them.
func (r *Reader) next(n int) ([]byte, error) {
	if n < 0 || n > r.Remaining() {
		return nil, r.Fail("truncated value")
	}
	s := r.b[r.off : r.off+n]
	r.off += n
	return s, nil
}

// uintN reads a big-endian unsigned integer of n bytes (1, 2, 4 or 8).
func (r *Reader) uintN(n int) (uint64, error) {
	s, err := r.next(n)
	if err != nil {
		return 0, err
	}
	switch n {
	case 1:
		return uint64(s[0]), nil
	case 2:
		return uint64(binary.BigEndian.Uint16(s)), nil
	case 4:
		return uint64(binary.BigEndian.Uint32(s)), nil
	}
	return binary.BigEndian.Uint64(s), nil
}

// nilNext consumes a nil if one is next and reports whether it did.
func (r *Reader) NilNext() bool {
	if r.off < len(r.b) && r.b[r.off] == 0xc0 {
		r.off++
		return true
	}
	return false
}

// containerLen reads an array (isMap false) or map header. The count is
// checked against the remaining bytes: every element takes at least one.
func (r *Reader) containerLen(isMap bool) (int, error) {
	c, err := r.peek()
	if err != nil {
		return 0, err
	}
	var n uint64
	switch {
	case !isMap && c >= 0x90 && c <= 0x9f:
		r.off++
		n = uint64(c & 0x0f)
	case isMap && c >= 0x80 && c <= 0x8f:
		r.off++
		n = uint64(c & 0x0f)
	case !isMap && c == 0xdc, isMap && c == 0xde:
		r.off++
		n, err = r.uintN(2)
	case !isMap && c == 0xdd, isMap && c == 0xdf:
		r.off++
		n, err = r.uintN(4)
	default:
		if isMap {
			return 0, r.Fail("expected map")
		}
		return 0, r.Fail("expected array")
	}
	if err != nil {
		return 0, err
	}
	per := uint64(1)
	if isMap {
		per = 2
	}
	if n*per > uint64(r.Remaining()) {
		return 0, r.Fail("container longer than its frame")
	}
	return int(n), nil
}

// ArrayLen reads an array header and returns its element count, which is
// never more than the bytes that remain.
func (r *Reader) ArrayLen() (int, error) { return r.containerLen(false) }

// MapLen reads a map header and returns its pair count, which is never
// more than the bytes that remain.
func (r *Reader) MapLen() (int, error) { return r.containerLen(true) }

// IsArray and IsMap report the kind of the next value without consuming it.
func (r *Reader) IsArray() bool {
	c, err := r.peek()
	return err == nil && (c >= 0x90 && c <= 0x9f || c == 0xdc || c == 0xdd)
}

// IsMap: see IsArray.
func (r *Reader) IsMap() bool {
	c, err := r.peek()
	return err == nil && (c >= 0x80 && c <= 0x8f || c == 0xde || c == 0xdf)
}

// Integer reads any msgpack integer. neg reports a negative signed value,
// in which case v is its two's-complement bit pattern.
func (r *Reader) Integer() (v uint64, neg bool, err error) {
	c, err := r.peek()
	if err != nil {
		return 0, false, err
	}
	switch {
	case c <= 0x7f:
		r.off++
		return uint64(c), false, nil
	case c >= 0xe0:
		r.off++
		return uint64(int64(int8(c))), true, nil
	case c >= 0xcc && c <= 0xcf:
		r.off++
		v, err = r.uintN(1 << (c - 0xcc))
		return v, false, err
	case c >= 0xd0 && c <= 0xd3:
		r.off++
		n := 1 << (c - 0xd0)
		u, err := r.uintN(n)
		if err != nil {
			return 0, false, err
		}
		// Sign-extend from n bytes.
		shift := 64 - 8*uint(n)
		s := int64(u<<shift) >> shift
		return uint64(s), s < 0, nil
	}
	return 0, false, r.Fail("expected integer")
}

// Uint64 reads a non-negative integer.
func (r *Reader) Uint64() (uint64, error) {
	v, neg, err := r.Integer()
	if err != nil {
		return 0, err
	}
	if neg {
		return 0, r.Fail("negative integer")
	}
	return v, nil
}

// Bool reads true or false.
func (r *Reader) Bool() (bool, error) {
	c, err := r.peek()
	if err != nil {
		return false, err
	}
	if c != 0xc2 && c != 0xc3 {
		return false, r.Fail("expected bool")
	}
	r.off++
	return c == 0xc3, nil
}

// Uint32 reads an integer in [0, 2^32).
func (r *Reader) Uint32() (uint32, error) {
	v, neg, err := r.Integer()
	if err != nil {
		return 0, err
	}
	if neg || v > math.MaxUint32 {
		return 0, r.Fail("integer out of uint32 range")
	}
	return uint32(v), nil
}

// Int reads an integer in the int64 range.
func (r *Reader) Int() (int64, error) {
	v, neg, err := r.Integer()
	if err != nil {
		return 0, err
	}
	if !neg && v > math.MaxInt64 {
		return 0, r.Fail("integer out of int64 range")
	}
	return int64(v), nil
}

// Number reads a float or an integer as float64.
func (r *Reader) Number() (float64, error) {
	c, err := r.peek()
	if err != nil {
		return 0, err
	}
	switch c {
	case 0xca:
		r.off++
		u, err := r.uintN(4)
		return float64(math.Float32frombits(uint32(u))), err
	case 0xcb:
		r.off++
		u, err := r.uintN(8)
		return math.Float64frombits(u), err
	}
	v, neg, err := r.Integer()
	if neg {
		return float64(int64(v)), err
	}
	return float64(v), err
}

// StrOrBin reads a str (wantStr) or a bin value and returns its bytes, a
// sub-slice of the input.
func (r *Reader) StrOrBin(wantStr bool) ([]byte, error) {
	c, err := r.peek()
	if err != nil {
		return nil, err
	}
	var n uint64
	switch {
	case wantStr && c >= 0xa0 && c <= 0xbf:
		r.off++
		n = uint64(c & 0x1f)
	case wantStr && c >= 0xd9 && c <= 0xdb:
		r.off++
		n, err = r.uintN(1 << (c - 0xd9))
	case !wantStr && c >= 0xc4 && c <= 0xc6:
		r.off++
		n, err = r.uintN(1 << (c - 0xc4))
	default:
		if wantStr {
			return nil, r.Fail("expected string")
		}
		return nil, r.Fail("expected binary")
	}
	if err != nil {
		return nil, err
	}
	if n > uint64(r.Remaining()) {
		return nil, r.Fail("string longer than its frame")
	}
	return r.next(int(n))
}

// Str reads a str value and returns its bytes, a sub-slice of the input.
func (r *Reader) Str() ([]byte, error) { return r.StrOrBin(true) }

// OptStr reads a string or nil (returned as "", false). Unlike the other
// methods it allocates: the string is a copy. OptBytes does not.
func (r *Reader) OptStr() (string, bool, error) {
	b, ok, err := r.OptBytes()
	return string(b), ok, err
}

// OptBytes reads a str or nil (returned as nil, false); the bytes are a
// sub-slice of the input.
func (r *Reader) OptBytes() ([]byte, bool, error) {
	if r.NilNext() {
		return nil, false, nil
	}
	b, err := r.Str()
	return b, err == nil, err
}

// IsBin reports whether the next value is a bin.
func (r *Reader) IsBin() bool {
	c, err := r.peek()
	return err == nil && c >= 0xc4 && c <= 0xc6
}

// Skip advances past one complete value of any type. It keeps a count of
// values still to skip instead of recursing, so a deeply nested payload
// costs no stack; container lengths are bounded by the frame, so the count
// is too.
func (r *Reader) Skip() error {
	for pending := 1; pending > 0; pending-- {
		c, err := r.peek()
		if err != nil {
			return err
		}
		r.off++
		var n uint64 // bytes of payload to jump over
		switch {
		case c <= 0x7f, c >= 0xe0, c == 0xc0, c == 0xc2, c == 0xc3:
		case c >= 0x80 && c <= 0x8f:
			pending += 2 * int(c&0x0f)
		case c >= 0x90 && c <= 0x9f:
			pending += int(c & 0x0f)
		case c >= 0xa0 && c <= 0xbf:
			n = uint64(c & 0x1f)
		case c == 0xc4 || c == 0xd9:
			n, err = r.uintN(1)
		case c == 0xc5 || c == 0xda:
			n, err = r.uintN(2)
		case c == 0xc6 || c == 0xdb:
			n, err = r.uintN(4)
		case c == 0xc7:
			n, err = r.uintN(1)
			n++ // ext type byte
		case c == 0xc8:
			n, err = r.uintN(2)
			n++
		case c == 0xc9:
			n, err = r.uintN(4)
			n++
		case c == 0xca:
			n = 4
		case c == 0xcb:
			n = 8
		case c >= 0xcc && c <= 0xcf:
			n = 1 << (c - 0xcc)
		case c >= 0xd0 && c <= 0xd3:
			n = 1 << (c - 0xd0)
		case c >= 0xd4 && c <= 0xd8:
			n = 1 + 1<<(c-0xd4) // fixext: type byte + 1..16 bytes
		case c == 0xdc || c == 0xde:
			var k uint64
			k, err = r.uintN(2)
			pending += int(k) << b2i(c == 0xde)
		case c == 0xdd || c == 0xdf:
			var k uint64
			k, err = r.uintN(4)
			pending += int(k) << b2i(c == 0xdf)
		default: // 0xc1 is never used
			r.off--
			return r.Fail("invalid type code")
		}
		if err != nil {
			return err
		}
		if n > uint64(r.Remaining()) {
			return r.Fail("truncated value")
		}
		r.off += int(n)
		if pending-1 > r.Remaining() {
			return r.Fail("container longer than its frame")
		}
	}
	return nil
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}
