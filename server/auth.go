package server

import (
	"errors"
	"fmt"

	"github.com/kvselect/kvselect/internal/authtoken"
)

// Tokens and their rotation (SPEC §11). The node's admin token lives in
// one authtoken.Holder that every part reads on use: the HTTP service's
// bearer check, the writes a follower forwards to the leader, the
// cluster's own calls to other nodes (join, metadata, status), the /dump
// fetch of the index recovery, and replica sync's MAC key. The selection
// token has a Holder of its own, read by the HTTP check alone: a node
// never sends it. Changing a Holder changes it for all its readers at
// once, from the next request or message on.
//
// A token file may hold two lines: the node sends and signs with the
// first and accepts both, in HTTP and replica sync alike, so a rotation
// staged as "old\nnew", "new\nold", "new" on every node in turn (each
// with a SIGHUP) never has two nodes that refuse each other (README,
// Rotating a token). Replica sync's time-based grace for a replaced token
// is off (replicasync.go): a node accepts exactly the tokens its files
// hold.

// ErrNoTokenFile is ReloadAuthToken's error when the node was started
// without --auth-token-file.
var ErrNoTokenFile = errors.New("no --auth-token-file to reload")

// ErrSameToken: the selection token is also an admin token. It would give
// every holder of the selection token the admin routes.
var ErrSameToken = errors.New("the selection token must differ from the admin token")

// SetAuthToken makes token the node's only admin token. The old one is
// refused from the next request or message on. An invalid token
// (authtoken.Validate), or one the selection token equals, changes
// nothing.
func (s *Server) SetAuthToken(token string) error {
	if err := authtoken.Validate(token); err != nil {
		return err
	}
	if s.selection.Accepts(token) {
		return ErrSameToken
	}
	if s.auth.Set(token) {
		s.log.Info("auth token changed")
	}
	return nil
}

// ReloadAuthToken reads --auth-token-file and --selection-token-file
// again (SIGHUP) and makes their tokens the node's. Each file stands on its
// own: one that fails the checks of authtoken.ReadFile (unreadable, empty,
// world-writable...) keeps its current tokens, is logged and is part of
// the error, and the other file is applied all the same, so a bad admin
// file cannot hold back the revocation of a leaked selection token. Only
// when the two files' tokens would overlap is neither applied.
func (s *Server) ReloadAuthToken() error {
	if s.cfg.AuthTokenFile == "" {
		s.log.Warn("auth token reload asked, but the node runs without --auth-token-file")
		return ErrNoTokenFile
	}
	curAdmin, curSelection := *s.auth.Load(), *s.selection.Load()
	admin, errAdmin := s.readTokenFile("auth token", s.cfg.AuthTokenFile)
	if errAdmin != nil {
		admin = curAdmin
	}
	selection, errSelection := curSelection, error(nil)
	if s.cfg.SelectionTokenFile != "" {
		if selection, errSelection = s.readTokenFile("selection token", s.cfg.SelectionTokenFile); errSelection != nil {
			selection = curSelection
		}
	}
	if overlap(&admin, &selection) {
		s.log.Error("auth token reload failed; keeping the current tokens", "err", ErrSameToken,
			"file", s.cfg.AuthTokenFile, "selection_file", s.cfg.SelectionTokenFile)
		return errors.Join(errAdmin, errSelection, ErrSameToken)
	}
	// One at a time, in the order that never makes a token both: a new
	// admin token that is the current selection token waits until the
	// selection token has moved (and the other way round, which the
	// default order covers).
	setAdmin := func() {
		if errAdmin == nil {
			s.setTokens("auth token", s.cfg.AuthTokenFile, s.auth, admin)
		}
	}
	setSelection := func() {
		if s.cfg.SelectionTokenFile != "" && errSelection == nil {
			s.setTokens("selection token", s.cfg.SelectionTokenFile, s.selection, selection)
		}
	}
	if overlap(&admin, &curSelection) {
		setSelection()
		setAdmin()
	} else {
		setAdmin()
		setSelection()
	}
	return errors.Join(errAdmin, errSelection)
}

// readTokenFile reads one token file, logging a failure.
func (s *Server) readTokenFile(what, path string) (authtoken.Secret, error) {
	token, also, err := authtoken.ReadFile(path)
	if err != nil {
		s.log.Error(what+" reload failed; keeping the current "+what+" (a good other token file is applied all the same)",
			"file", path, "err", err)
		return authtoken.Secret{}, err
	}
	return authtoken.Secret{Token: token, Also: also}, nil
}

// setTokens makes a file's tokens h's, and logs what changed.
func (s *Server) setTokens(what, path string, h *authtoken.Holder, sec authtoken.Secret) {
	accepted := 1
	if sec.Also != "" {
		accepted = 2
	}
	if !h.SetTokens(sec.Token, sec.Also) {
		s.log.Info(what+" reloaded; unchanged", "file", path, "tokens_accepted", accepted)
		return
	}
	s.log.Info(what+" reloaded: the first line is sent, every line accepted; a token no longer in the file is refused from now on",
		"file", path, "tokens_accepted", accepted)
}

// minTokenLen is the token length below which a node warns: a token is a
// shared secret that can be guessed offline from a replica-sync MAC, so it
// should be random and long (openssl rand -hex 32 gives 64 characters).
const minTokenLen = 16

// warnWeakTokens logs a warning for each configured token shorter than
// minTokenLen; it refuses none (tests and demos use short ones).
func (s *Server) warnWeakTokens(cfg *Config) {
	for _, t := range []struct{ name, token string }{
		{"admin token", cfg.AuthToken}, {"admin token (second line)", cfg.AuthTokenAlso},
		{"selection token", cfg.SelectionToken}, {"selection token (second line)", cfg.SelectionTokenAlso},
	} {
		if t.token != "" && len(t.token) < minTokenLen {
			s.log.Warn("a short token is easy to guess; use at least 16 random characters (openssl rand -hex 32)",
				"token", t.name, "length", len(t.token))
		}
	}
}

// overlap reports whether a token of one secret is a token of the other.
func overlap(a, b *authtoken.Secret) bool {
	for _, t := range []string{b.Token, b.Also} {
		if a.Accepts(t) {
			return true
		}
	}
	return false
}

// checkTokens validates the tokens of a configuration.
func checkTokens(cfg *Config) error {
	for _, t := range []struct{ name, token string }{
		{"AuthToken", cfg.AuthToken}, {"AuthTokenAlso", cfg.AuthTokenAlso},
		{"SelectionToken", cfg.SelectionToken}, {"SelectionTokenAlso", cfg.SelectionTokenAlso},
	} {
		if t.token == "" {
			continue
		}
		if err := authtoken.Validate(t.token); err != nil {
			return fmt.Errorf("%s: %w", t.name, err)
		}
	}
	switch {
	case cfg.AuthToken == "" && cfg.AuthTokenAlso != "":
		return fmt.Errorf("%w: AuthTokenAlso without AuthToken", authtoken.ErrInvalid)
	case cfg.SelectionToken == "" && cfg.SelectionTokenAlso != "":
		return fmt.Errorf("%w: SelectionTokenAlso without SelectionToken", authtoken.ErrInvalid)
	case cfg.SelectionToken != "" && cfg.AuthToken == "":
		return ErrSelectionWithoutAdmin
	}
	admin := authtoken.Secret{Token: cfg.AuthToken, Also: cfg.AuthTokenAlso}
	if overlap(&admin, &authtoken.Secret{Token: cfg.SelectionToken, Also: cfg.SelectionTokenAlso}) {
		return ErrSameToken
	}
	return nil
}

// ErrSelectionWithoutAdmin: a selection token on a node without an admin
// token, whose routes would all be open anyway.
var ErrSelectionWithoutAdmin = errors.New("a selection token needs an admin token (--selection-token-file needs --auth-token-file)")
