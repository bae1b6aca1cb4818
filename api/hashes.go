package api

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"strconv"
)

// Hashes is a list of 64-bit block or sequence hashes. On the wire each
// value may be unsigned (0 … 2^64−1) or signed (−2^63 … −1, reinterpreted
// bit for bit as unsigned), since engines publish either; Hashes always
// sends unsigned values. A list holds at most MaxHashes values.
type Hashes []uint64

// TokenIDs is a prompt's token ids (unsigned 32-bit), at most MaxHashes.
type TokenIDs []uint32

var (
	hashesType = reflect.TypeFor[Hashes]()
	tokensType = reflect.TypeFor[TokenIDs]()
)

// UnmarshalJSON decodes an array of integers without reflection or
// interface values, which matters for prompts of thousands of hashes.
func (h *Hashes) UnmarshalJSON(raw []byte) error {
	if isNull(raw) {
		return nil // absent, as encoding/json treats null
	}
	out := make(Hashes, 0, countElements(raw))
	err := scanIntArray(raw, hashesType, func(i int, neg bool, mag uint64) error {
		if neg {
			if mag > 1<<63 {
				return arrayError(hashesType, i, "below the signed 64-bit range")
			}
			out = append(out, -mag)
			return nil
		}
		out = append(out, mag)
		return nil
	})
	if err != nil {
		return err
	}
	*h = out
	return nil
}

// UnmarshalJSON decodes an array of token ids.
func (t *TokenIDs) UnmarshalJSON(raw []byte) error {
	if isNull(raw) {
		return nil
	}
	out := make(TokenIDs, 0, countElements(raw))
	err := scanIntArray(raw, tokensType, func(i int, neg bool, mag uint64) error {
		if neg || mag > math.MaxUint32 {
			return arrayError(tokensType, i, "token ids are unsigned 32-bit integers")
		}
		out = append(out, uint32(mag))
		return nil
	})
	if err != nil {
		return err
	}
	*t = out
	return nil
}

// ValueProblem returns the message of a decoding error raised by this
// package's checked types (Hashes, TokenIDs, ID). They report problems as
// *json.UnmarshalTypeError, which encoding/json completes with the path of
// the field at fault (and, for arrays, the element's position, "[i]"), so
// a server can name it exactly ("block_hashes[3]: expected an integer").
func ValueProblem(e *json.UnmarshalTypeError) (msg string, ok bool) {
	if e.Type != hashesType && e.Type != tokensType && e.Type != idType {
		return "", false
	}
	return e.Value, true
}

// arrayError reports a bad element i (or the whole array when i < 0) as
// the *json.UnmarshalTypeError that encoding/json completes with the
// field's path.
func arrayError(t reflect.Type, i int, format string, args ...any) error {
	e := &json.UnmarshalTypeError{Value: fmt.Sprintf(format, args...), Type: t}
	if i >= 0 {
		e.Field = "[" + strconv.Itoa(i) + "]"
	}
	return e
}

func isNull(raw []byte) bool { return string(bytes.TrimSpace(raw)) == "null" }

// countElements guesses the length of an array of numbers from its commas,
// so the decoded slice is allocated once.
func countElements(raw []byte) int {
	n := bytes.Count(raw, []byte{','}) + 1
	return min(n, MaxHashes)
}

// scanIntArray walks a JSON array of integers (raw is syntactically valid
// JSON, as encoding/json hands it over) and calls add with each element's
// sign and magnitude.
func scanIntArray(raw []byte, t reflect.Type, add func(i int, neg bool, mag uint64) error) error {
	b := bytes.TrimSpace(raw)
	if len(b) == 0 || b[0] != '[' {
		return arrayError(t, -1, "expected an array of integers")
	}
	i, n := 1, 0
	skip := func() {
		for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
			i++
		}
	}
	skip()
	if i < len(b) && b[i] == ']' {
		return nil
	}
	for {
		skip()
		if n >= MaxHashes {
			return arrayError(t, -1, "more than %d entries", MaxHashes)
		}
		neg := i < len(b) && b[i] == '-'
		if neg {
			i++
		}
		start, mag, overflow := i, uint64(0), false
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			d := uint64(b[i] - '0')
			overflow = overflow || mag > (math.MaxUint64-d)/10
			mag = mag*10 + d
			i++
		}
		if i == start {
			return arrayError(t, n, "expected an integer")
		}
		if i < len(b) && (b[i] == '.' || b[i] == 'e' || b[i] == 'E') {
			return arrayError(t, n, "expected an integer, got a fraction or exponent")
		}
		if overflow {
			return arrayError(t, n, "outside the 64-bit range")
		}
		if err := add(n, neg && mag != 0, mag); err != nil {
			return err
		}
		n++
		skip()
		if i >= len(b) {
			return arrayError(t, -1, "unterminated array")
		}
		switch b[i] {
		case ',':
			i++
		case ']':
			return nil
		default:
			return arrayError(t, -1, "expected ',' or ']' after element %d", n-1)
		}
	}
}
