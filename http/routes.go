package http

import (
	"net/http"
	"slices"
	"strings"

	"github.com/gorilla/mux"

	"github.com/kvselect/kvselect/api"
)

// handler is a route's handler: it returns errors instead of writing them.
type handler func(http.ResponseWriter, *http.Request) error

// access levels of a route.
const (
	open      = iota // never needs a token
	selection        // needs a token only with AuthAll
	admin            // needs a token whenever one is configured
)

// where a route runs.
const (
	anyNode        = iota // this node answers from local state
	onLeader              // only the leader; followers forward or redirect
	onLeaderIfLinz        // the leader when ?consistency=linearizable
)

// route is one row of the API.
type route struct {
	method, path string
	access       int
	where        int
	h            handler
}

// routes is the whole API in one table. api/openapi.json documents the
// same rows; a test keeps the two in agreement.
func (s *Service) routes() []route {
	return []route{
		{"GET", api.PathHealth, open, anyNode, s.health},
		{"GET", api.PathReady, selection, anyNode, s.ready},
		{"GET", api.PathMetrics, selection, anyNode, s.serveMetrics},
		{"GET", api.PathOpenAPI, open, anyNode, s.openAPI},

		{"GET", api.PathWorkers, selection, onLeaderIfLinz, s.listWorkers},
		{"POST", api.PathWorkers, admin, onLeader, s.upsertWorker},
		{"GET", api.PathWorker, selection, onLeaderIfLinz, s.getWorker},
		{"PATCH", api.PathWorker, admin, onLeader, s.patchWorker},
		{"DELETE", api.PathWorker, admin, onLeader, s.deleteWorker},

		{"POST", api.PathSelect, selection, anyNode, s.selectWorker},
		{"POST", api.PathSelectAndReserve, selection, anyNode, s.selectAndReserve},
		{"POST", api.PathReservations, selection, anyNode, s.createReservation},
		{"GET", api.PathReservations, selection, anyNode, s.listReservations},
		{"GET", api.PathReservation, selection, anyNode, s.getReservation},
		{"DELETE", api.PathReservation, selection, anyNode, s.deleteReservation},
		{"POST", api.PathPrefillComplete, selection, anyNode, s.prefillComplete},
		{"POST", api.PathOutputBlock, selection, anyNode, s.outputBlock},

		{"GET", api.PathLoads, selection, anyNode, s.loads},
		{"POST", api.PathPotentialLoads, selection, anyNode, s.potentialLoads},
		{"POST", api.PathOverlapScores, selection, anyNode, s.overlapScores},
		{"GET", api.PathDump, admin, anyNode, s.dump},

		{"GET", api.PathClusterStatus, selection, anyNode, s.clusterStatus},
		{"POST", api.PathClusterJoin, admin, onLeader, s.clusterJoin},
		{"POST", api.PathClusterRemove, admin, onLeader, s.clusterRemove},
		{"POST", api.PathClusterStepDown, admin, onLeader, s.clusterStepDown},
		{"POST", api.PathClusterMetadata, admin, onLeader, s.clusterMetadata},
	}
}

// pathMethods is one path template with the methods it takes.
type pathMethods struct {
	match   *mux.Route
	methods []string
}

// buildRouter registers every route. HEAD is served wherever GET is. The
// router never cleans paths (ServeHTTP refuses dot segments instead), and
// unknown routes and methods get JSON errors; a 405 carries Allow.
func (s *Service) buildRouter() (*mux.Router, []pathMethods) {
	r := mux.NewRouter().SkipClean(true)
	paths := mux.NewRouter().SkipClean(true) // matches paths only, for Allow
	var allow []pathMethods
	byPath := map[string]int{}
	for _, rt := range s.routes() {
		h := rt.h
		switch rt.where {
		case onLeader:
			h = s.leaderRoute(h)
		case onLeaderIfLinz:
			h = s.linearizableOnLeader(h)
		}
		methods := []string{rt.method}
		if rt.method == http.MethodGet {
			methods = append(methods, http.MethodHead)
		}
		r.Handle(rt.path, s.wrap(rt.path, rt.access, h)).Methods(methods...)
		i, ok := byPath[rt.path]
		if !ok {
			i = len(allow)
			byPath[rt.path] = i
			allow = append(allow, pathMethods{match: paths.NewRoute().Path(rt.path)})
		}
		allow[i].methods = append(allow[i].methods, methods...)
	}
	r.NotFoundHandler = http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { s.fail(w, errNoRoute) })
	r.MethodNotAllowedHandler = http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		w.Header().Set("Allow", strings.Join(s.allowed(req), ", "))
		s.fail(w, errMethod)
	})
	return r, allow
}

// allowed lists the methods the request's path takes, sorted.
func (s *Service) allowed(req *http.Request) []string {
	for _, pm := range s.allow {
		var m mux.RouteMatch
		if pm.match.Match(req, &m) {
			out := slices.Clone(pm.methods)
			slices.Sort(out)
			return out
		}
	}
	return nil
}

// checkPath refuses paths with dot or empty segments.
func checkPath(path string) error {
	if path == "/" {
		return nil
	}
	for _, seg := range strings.Split(strings.TrimPrefix(path, "/"), "/") {
		switch seg {
		case ".", "..":
			return badRequest("path", "%q has a dot segment; send the path of the resource itself", path)
		case "":
			return badRequest("path", "%q has an empty segment", path)
		}
	}
	return nil
}
