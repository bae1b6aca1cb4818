package authtoken

import (
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
	// Token is the current token; "" when the node runs without one.
	Token string
	// Previous is the token Token replaced, "" before any rotation.
	Previous string
	// Rotated is when Token replaced Previous.
	Rotated time.Time
}

// Holder is a node's current token, read by every part that checks or
// sends it. The zero value and a nil *Holder hold no token. It is safe for
// concurrent use.
type Holder struct {
	p atomic.Pointer[Secret]
}

// NewHolder returns a Holder with token ("" for none).
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

// Set makes token the current one and reports whether it changed; the
// token it replaces becomes Previous. Setting the current token again
// changes nothing, so a reload of an unchanged file does not extend the
// previous token's grace. The caller validates token (Validate).
func (h *Holder) Set(token string) bool {
	for {
		cur := h.p.Load()
		old := cur
		if old == nil {
			old = none
		}
		if old.Token == token {
			return false
		}
		if h.p.CompareAndSwap(cur, &Secret{Token: token, Previous: old.Token, Rotated: time.Now()}) {
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
// token), at most MaxFileSize bytes, and hold one valid token once
// surrounding white space is trimmed. Every error names the file and the
// problem, never the token.
func ReadFile(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", fmt.Errorf("%w: %w", ErrInvalid, err) // *PathError names the file
	}
	defer f.Close()
	fi, err := f.Stat() // of the file opened, not of whatever the path names by now
	if err != nil {
		return "", fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	if fi.IsDir() {
		return "", fmt.Errorf("%w: %s is a directory", ErrInvalid, path)
	}
	if perm := fi.Mode().Perm(); perm&0o002 != 0 {
		return "", fmt.Errorf("%w: %s is world-writable (mode %#o): anyone on the host could replace the token; chmod o-w it", ErrInvalid, path, perm)
	}
	raw, err := io.ReadAll(io.LimitReader(f, MaxFileSize+1))
	if err != nil {
		return "", fmt.Errorf("%w: read %s: %w", ErrInvalid, path, err)
	}
	if len(raw) > MaxFileSize {
		return "", fmt.Errorf("%w: %s is larger than %d bytes: not a token file", ErrInvalid, path, MaxFileSize)
	}
	token := strings.TrimSpace(string(raw))
	if token == "" {
		return "", fmt.Errorf("%w: %s is empty", ErrInvalid, path)
	}
	if err := Validate(token); err != nil {
		return "", fmt.Errorf("%s: %w", path, err)
	}
	return token, nil
}
