package zmqsync

import (
	"crypto/hmac"
	"crypto/sha256"
	"errors"
	"hash"
	"time"

	"github.com/kvselect/kvselect/internal/authtoken"
)

// Authentication of replica-sync messages (doc.go, "Authentication").
const (
	// MACSize is the length of the MAC frame: an HMAC-SHA256.
	MACSize = sha256.Size
	// keyLabel separates the replica-sync key from every other use of the
	// token: the key is HMAC-SHA256(token, keyLabel), never the token.
	keyLabel = "kvselect replica-sync v1"
	// DefaultPreviousTokenGrace is how long after a token rotation
	// messages authenticated with the previous token are still accepted,
	// so that nodes reloaded one after another keep syncing.
	DefaultPreviousTokenGrace = 2 * time.Minute
)

// Why open drops a message, for the debug log.
var (
	errFrames = errors.New("not a replica-sync message: want the topic, the payload and an optional MAC frame of 32 bytes")
	errNoMAC  = errors.New("no MAC frame: the peer runs without the token, or is a version without replica-sync authentication")
	errBadMAC = errors.New("the MAC does not match: the peer has another token, or the message was altered")
)

// deriveKey returns the replica-sync key of a token.
func deriveKey(token string) []byte {
	h := hmac.New(sha256.New, []byte(token))
	h.Write([]byte(keyLabel))
	return h.Sum(nil)
}

// AppendMAC appends to dst the MAC frame that authenticates payload (the
// second frame of a message) under token: HMAC-SHA256 keyed by
// HMAC-SHA256(token, "kvselect replica-sync v1"). The sender and receivers
// of this package compute the same with reused hash state.
func AppendMAC(dst, payload []byte, token string) []byte {
	var m macer
	return m.sum(dst, token, payload)
}

// macer computes the MACs of one token, reusing its hash state between
// messages; it rebuilds it when the token changes. Not safe for concurrent
// use: the sender and each peer goroutine have their own.
type macer struct {
	token string
	h     hash.Hash
}

// sum appends the MAC of payload under token to dst.
func (m *macer) sum(dst []byte, token string, payload []byte) []byte {
	if m.h == nil || m.token != token {
		m.h, m.token = hmac.New(sha256.New, deriveKey(token)), token
	}
	m.h.Reset()
	m.h.Write(payload)
	return m.h.Sum(dst)
}

// opener checks and decodes the messages of one peer; its hash state is
// the peer goroutine's own.
type opener struct {
	cur, also, prev macer
	buf             [MACSize]byte
}

// open checks one received ZMQ message and decodes its payload into m:
// the frames (topic, payload, and an optional MAC of MACSize bytes), then,
// while sec holds a token, the MAC under that token, its second one (a
// token file's second line) or, for grace after a rotation, the previous
// one; only then the payload. It returns "" or why
// the message is dropped (a reason label of the dropped-messages counter)
// with an error saying more. A node without a token ignores a MAC frame:
// it accepts anything, and so keeps syncing with nodes given a token first.
func (o *opener) open(frames [][]byte, sec *authtoken.Secret, grace time.Duration, m *Message) (string, error) {
	if len(frames) < 2 || len(frames) > 3 || string(frames[0]) != Topic || len(frames) == 3 && len(frames[2]) != MACSize {
		m.reset()
		return "frames", errFrames
	}
	if sec.Token != "" {
		if len(frames) != 3 {
			m.reset()
			return "unauthenticated", errNoMAC
		}
		if !o.verify(sec, grace, frames[1], frames[2]) {
			m.reset()
			return "unauthenticated", errBadMAC
		}
	}
	if err := DecodeMessage(frames[1], m); err != nil {
		if errors.Is(err, ErrUnknownVersion) {
			return "unknown_version", err
		}
		return "malformed", err
	}
	return "", nil
}

// verify reports whether mac authenticates payload under sec's token, its
// second token (authtoken.Secret.Also), or its previous token within grace
// of the rotation. hmac.Equal takes the same time whatever bytes differ.
func (o *opener) verify(sec *authtoken.Secret, grace time.Duration, payload, mac []byte) bool {
	if hmac.Equal(o.cur.sum(o.buf[:0], sec.Token, payload), mac) {
		return true
	}
	if sec.Also != "" && hmac.Equal(o.also.sum(o.buf[:0], sec.Also, payload), mac) {
		return true
	}
	return sec.Previous != "" && time.Since(sec.Rotated) < grace &&
		hmac.Equal(o.prev.sum(o.buf[:0], sec.Previous, payload), mac)
}
