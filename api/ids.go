package api

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"unicode/utf8"
)

// ErrBadID is wrapped by ValidateID's errors.
var ErrBadID = errors.New("invalid id")

// ID is a reservation or selection id in a request body. Decoding checks
// it (ValidateID), so an explicit "" or an id with '/' is refused with the
// field's name, while an absent id stays "" (the node then generates one
// where the API allows it).
type ID string

var idType = reflect.TypeFor[ID]()

// UnmarshalJSON decodes a JSON string and validates it as an id.
func (id *ID) UnmarshalJSON(raw []byte) error {
	if isNull(raw) {
		return nil // absent, as encoding/json treats null
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return &json.UnmarshalTypeError{Value: "expected a string", Type: idType}
	}
	if err := ValidateID(s); err != nil {
		return &json.UnmarshalTypeError{Value: strings.TrimPrefix(err.Error(), ErrBadID.Error()+": "), Type: idType}
	}
	*id = ID(s)
	return nil
}

// ValidateID checks a reservation or selection id: 1 to MaxIDLen bytes of
// printable ASCII without '/', '?', '#', '%' or space, and never "." or
// "..", so that every id can stand in a path segment as it is (SPEC §3): a
// dot segment names another resource, and the API refuses such paths, so a
// booking under one could never be freed by id.
func ValidateID(id string) error {
	if id == "" {
		return fmt.Errorf("%w: must not be empty", ErrBadID)
	}
	if id == "." || id == ".." {
		return fmt.Errorf("%w: %q is a dot segment, which cannot name a resource in a path", ErrBadID, id)
	}
	if len(id) > MaxIDLen {
		return fmt.Errorf("%w: %d bytes, at most %d", ErrBadID, len(id), MaxIDLen)
	}
	for i := 0; i < len(id); i++ {
		switch c := id[i]; {
		case c <= ' ' || c >= 0x7f:
			return fmt.Errorf("%w: byte %d is %s; ids are printable ASCII without spaces", ErrBadID, i, quoteByte(c))
		case c == '/' || c == '?' || c == '#' || c == '%':
			return fmt.Errorf("%w: byte %d is %q; ids must not contain '/', '?', '#' or '%%'", ErrBadID, i, c)
		}
	}
	return nil
}

// quoteByte quotes one byte of an id as Go does an ASCII rune (' ', '\t',
// '\x7f'), and any other byte as a hex escape ('\xc3'): %q of a byte would
// show the Latin-1 character of that value, which is not what was sent.
func quoteByte(c byte) string {
	if c < utf8.RuneSelf {
		return strconv.QuoteRune(rune(c))
	}
	return fmt.Sprintf(`'\x%02x'`, c)
}
