package server

import (
	"errors"

	"github.com/kvselect/kvselect/internal/authtoken"
)

// Token rotation (SPEC §11). The node's token lives in one
// authtoken.Holder that every part reads on use: the HTTP service's bearer
// check, the cluster's own calls to other nodes (join, metadata), the /dump
// fetch of the index recovery, and replica sync's MAC key. Changing it
// here changes it for all of them at once, from the next request or
// message on. Writes a follower forwards to the leader carry the client's
// own Authorization, which the leader checks against its own token.
// Replica sync's time-based grace for a replaced token is off
// (replicasync.go): a node accepts exactly the tokens its file holds.

// ErrNoTokenFile is ReloadAuthToken's error when the node was started
// without --auth-token-file.
var ErrNoTokenFile = errors.New("no --auth-token-file to reload")

// SetAuthToken makes token the node's only token. The old one is refused
// from the next request or message on. An invalid token
// (authtoken.Validate) changes nothing.
func (s *Server) SetAuthToken(token string) error {
	if err := authtoken.Validate(token); err != nil {
		return err
	}
	if s.auth.Set(token) {
		s.log.Info("auth token changed")
	}
	return nil
}

// ReloadAuthToken reads Config.AuthTokenFile again (SIGHUP) and makes its
// tokens the node's: the first line is sent and signs replica-sync
// messages, and every line is accepted, so a rotation staged as
// "old\nnew", "new\nold", "new" on every node in turn never has two nodes
// that refuse each other. A file that fails the checks of
// authtoken.ReadFile (unreadable, empty, world-writable...) leaves the
// current tokens in place and is logged as an error.
func (s *Server) ReloadAuthToken() error {
	path := s.cfg.AuthTokenFile
	if path == "" {
		s.log.Warn("auth token reload asked, but the node runs without --auth-token-file")
		return ErrNoTokenFile
	}
	token, also, err := authtoken.ReadFile(path)
	if err != nil {
		s.log.Error("auth token reload failed; keeping the current token", "file", path, "err", err)
		return err
	}
	if !s.auth.SetTokens(token, also) {
		s.log.Info("auth token reloaded; unchanged", "file", path)
		return nil
	}
	s.log.Info("auth token reloaded: the first line is sent, every line accepted; a token no longer in the file is refused from now on", "file", path)
	return nil
}
