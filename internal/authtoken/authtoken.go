package authtoken

import (
	"crypto/subtle"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync/atomic"
	"time"
)

// MaxFileSize bounds the token file: a token is a line, and a larger file
// is a wrong path (a key, a binary), not a secret to send in a header.
const MaxFileSize = 4096

// ErrInvalid is wrapped by every error about a token or its file.
var ErrInvalid = errors.New("invalid auth token")

// Secret is one state of a Holder. It is never modified: a rotation
// stores a new one.
type Secret struct {
	// Token is the token the node sends and signs with (a token file's
	// first line), and accepts; "" when the node runs without one.
	Token string
	// Also is accepted as well as Token but never sent (a token file's
	// second line, during a rotation); "" for none.
	Also string
	// Previous is the token Token replaced, "" before any rotation.
	Previous string
	// Rotated is when Token replaced Previous.
	Rotated time.Time
}

// Accepts reports whether got is Token or Also. Both are compared, in
// constant time, whichever matches: the time taken says nothing about
// which token got is close to.
func (s *Secret) Accepts(got string) bool {
	if s.Token == "" || got == "" {
		return false
	}
	ok := subtle.ConstantTimeCompare([]byte(got), []byte(s.Token))
	also := subtle.ConstantTimeCompare([]byte(got), []byte(s.Also))
	if s.Also == "" {
		also = 0
	}
	return ok|also == 1
}

// Holder is a node's current token, read by every part that checks or
// sends it. The zero value and a nil *Holder hold no token. It is safe for
// concurrent use.
type Holder struct {
	p atomic.Pointer[Secret]
}

// NewHolder returns a Holder with token ("" for none); SetTokens adds a
// second token it accepts.
func NewHolder(token string) *Holder {
	h := &Holder{}
	h.p.Store(&Secret{Token: token})
	return h
}

var none = &Secret{}

// Load returns the current Secret, never nil.
func (h *Holder) Load() *Secret {
	if h == nil {
		return none
	}
	if s := h.p.Load(); s != nil {
		return s
	}
	return none
}

// Token returns the current token, "" for none.
func (h *Holder) Token() string { return h.Load().Token }

// Accepts reports whether got is one of the tokens the holder accepts
// (Secret.Accepts); never when it holds none.
func (h *Holder) Accepts(got string) bool { return h.Load().Accepts(got) }

// Set makes token the only current one (SetTokens with no second token).
func (h *Holder) Set(token string) bool { return h.SetTokens(token, "") }

// SetTokens makes token the one sent and accepted and also ("" for none)
// accepted too, and reports whether that changed anything. A token that
// replaces another makes that one Previous. Setting the same tokens again
// changes nothing, so a reload of an unchanged file does not extend the
// previous token's grace. The caller validates the tokens (Validate).
func (h *Holder) SetTokens(token, also string) bool {
	if also == token {
		also = ""
	}
	for {
		cur := h.p.Load()
		old := cur
		if old == nil {
			old = none
		}
		if old.Token == token && old.Also == also {
			return false
		}
		next := &Secret{Token: token, Also: also, Previous: old.Previous, Rotated: old.Rotated}
		if old.Token != token {
			next.Previous, next.Rotated = old.Token, time.Now()
		}
		if h.p.CompareAndSwap(cur, next) {
			return true
		}
	}
}

// Validate checks a token: not empty, and only visible ASCII characters
// (0x21 to 0x7e), so that it goes into an Authorization header as it is.
// The error never quotes the token.
func Validate(token string) error {
	if token == "" {
		return fmt.Errorf("%w: empty", ErrInvalid)
	}
	for i := 0; i < len(token); i++ {
		if c := token[i]; c < 0x21 || c > 0x7e {
			return fmt.Errorf("%w: byte %d is 0x%02x, which cannot go in an HTTP header (use visible ASCII, e.g. base64 or hex)", ErrInvalid, i, c)
		}
	}
	return nil
}

// ReadFile reads and checks a token file: it must be readable, not
// writable by everyone (mode & 0o002: anyone on the host could replace the
// token), at most MaxFileSize bytes, and hold one valid token or two, one
// a line, once surrounding white space is trimmed. The first line is the
// token to send (token); a second (also) is accepted as well, so that a
// token can be rotated node by node without an outage: "old\nnew", then
// "new\nold", then "new" (README, Authentication). also is "" for a file
// of one line, or two equal ones. Every error names the file and the
// problem, never the token.
func ReadFile(path string) (token, also string, err error) {
	f, err := os.Open(path)
	if err != nil {
		return "", "", fmt.Errorf("%w: %w", ErrInvalid, err) // *PathError names the file
	}
	defer f.Close()
	fi, err := f.Stat() // of the file opened, not of whatever the path names by now
	if err != nil {
		return "", "", fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	if fi.IsDir() {
		return "", "", fmt.Errorf("%w: %s is a directory", ErrInvalid, path)
	}
	if perm := fi.Mode().Perm(); perm&0o002 != 0 {
		return "", "", fmt.Errorf("%w: %s is world-writable (mode %#o): anyone on the host could replace the token; chmod o-w it", ErrInvalid, path, perm)
	}
	raw, err := io.ReadAll(io.LimitReader(f, MaxFileSize+1))
	if err != nil {
		return "", "", fmt.Errorf("%w: read %s: %w", ErrInvalid, path, err)
	}
	if len(raw) > MaxFileSize {
		return "", "", fmt.Errorf("%w: %s is larger than %d bytes: not a token file", ErrInvalid, path, MaxFileSize)
	}
	content := strings.TrimSpace(string(raw))
	if content == "" {
		return "", "", fmt.Errorf("%w: %s is empty", ErrInvalid, path)
	}
	lines := strings.Split(content, "\n")
	if len(lines) > 2 {
		return "", "", fmt.Errorf("%w: %s has %d lines: a token file holds one token, or two during a rotation (the one to send, then the other one accepted)",
			ErrInvalid, path, len(lines))
	}
	for i, l := range lines {
		lines[i] = strings.TrimSpace(l) // and a CR of CRLF; never empty, the content is trimmed
		if err := Validate(lines[i]); err != nil {
			return "", "", fmt.Errorf("%s: line %d: %w", path, i+1, err)
		}
	}
	if len(lines) == 2 && lines[1] != lines[0] {
		also = lines[1]
	}
	return lines[0], also, nil
}
