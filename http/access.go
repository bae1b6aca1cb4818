package http

import (
	"fmt"
	"net/http"

	"github.com/kvselect/kvselect/api"
)

// Scope is what the admin token protects (--auth-scope, SPEC §11).
type Scope string

const (
	// ScopeAll (the default whenever a token is configured): every route
	// but the open ones needs a token.
	ScopeAll Scope = "all"
	// ScopeAdmin is the explicit opt-in for a trusted network (Dynamo's
	// model): only worker and admin routes need one; selection, booking
	// lifecycle and inspection stay open.
	ScopeAdmin Scope = "admin"
)

// ParseScope parses --auth-scope.
func ParseScope(s string) (Scope, error) {
	switch sc := Scope(s); sc {
	case ScopeAll, ScopeAdmin:
		return sc, nil
	}
	return "", fmt.Errorf("must be %s or %s, got %q", ScopeAll, ScopeAdmin, s)
}

// grant is whose token a route takes.
type grant int

const (
	anyone      grant = iota // no token needed
	tokenHolder              // the admin or the selection token
	adminOnly                // the admin token; the selection token is 403
)

// accessTable says, for each access class a route of routes.go names,
// whose token it takes under each scope (api.AccessOpen and the others
// document the classes). A new route picks a class; a new class is a row.
var accessTable = map[string]struct{ all, admin grant }{
	api.AccessOpen:      {all: anyone, admin: anyone},
	api.AccessSelection: {all: tokenHolder, admin: anyone},
	api.AccessWorker:    {all: tokenHolder, admin: tokenHolder},
	api.AccessInspect:   {all: adminOnly, admin: anyone},
	api.AccessAdmin:     {all: adminOnly, admin: adminOnly},
}

// The WWW-Authenticate challenges of a 401 and of a 403 (RFC 6750 §3).
const (
	challenge        = `Bearer realm="kvselect"`
	challengeScope   = `Bearer realm="kvselect", error="insufficient_scope"`
	selectionRefused = "the selection token does not open this route: it needs the admin token (--auth-token-file)"
)

// grantOf returns whose token a route of the access class takes under
// the service's scope.
func (s *Service) grantOf(access string) grant {
	g := accessTable[access] // routes are checked against the table when built
	if s.cfg.Scope == ScopeAdmin {
		return g.admin
	}
	return g.all
}

// authorize checks a request's bearer token against its route's class. A
// node without an admin token is open (it says so at start). The tokens
// are compared in constant time, each of them whatever the other gave.
func (s *Service) authorize(w http.ResponseWriter, r *http.Request, access string) error {
	switch s.verdict(r, access) {
	case granted:
		return nil
	case denied:
		w.Header().Set("WWW-Authenticate", challengeScope)
		return fmt.Errorf("%w: %s", errForbidden, selectionRefused)
	}
	w.Header().Set("WWW-Authenticate", challenge)
	return errUnauthorized
}

// A request's standing for an access class.
type standing int

const (
	granted standing = iota
	denied           // the selection token, on a route it does not open
	refused          // no token, or a wrong one
)

// verdict judges a request's bearer token against an access class, as
// authorize does, without answering.
func (s *Service) verdict(r *http.Request, access string) standing {
	admin := s.cfg.Auth.Load()
	g := s.grantOf(access)
	if admin.Token == "" || g == anyone {
		return granted
	}
	got, _ := api.BearerToken(r.Header.Get(api.HeaderAuthorization))
	isAdmin, isSelection := admin.Accepts(got), s.cfg.Selection.Accepts(got)
	switch {
	case isAdmin, isSelection && g == tokenHolder:
		return granted
	case isSelection:
		return denied
	}
	return refused
}
