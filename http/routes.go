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

// route is one row of the API: who may call it (its access class,
// api.AccessOpen and the others; access.go) and which node answers it (api.RunsOnAny,
// RunsOnLeader or RunsOnLeaderIfLinearizable), as the OpenAPI document's
// x-kvselect-access and x-kvselect-runs-on say.
type route struct {
	method, path  string
	access, where string
	h             handler
}

// routes is the whole API in one table. api/openapi.json documents the
// same rows; a test keeps the two in agreement.
func (s *Service) routes() []route {
	return []route{
		{"GET", api.PathHealth, api.AccessOpen, api.RunsOnAny, s.health},
		{"GET", api.PathReady, api.AccessOpen, api.RunsOnAny, s.ready},
		{"GET", api.PathReadyz, api.AccessOpen, api.RunsOnAny, s.readyz},
		{"GET", api.PathMetrics, api.AccessSelection, api.RunsOnAny, s.serveMetrics},
		{"GET", api.PathOpenAPI, api.AccessOpen, api.RunsOnAny, s.openAPI},

		{"GET", api.PathWorkers, api.AccessSelection, api.RunsOnLeaderIfLinearizable, s.listWorkers},
		{"POST", api.PathWorkers, api.AccessAdmin, api.RunsOnLeader, s.upsertWorker},
		{"POST", api.PathKeepAlive, api.AccessWorker, api.RunsOnLeader, s.keepAliveMany},
		{"POST", api.PathWorkerKeepAlive, api.AccessWorker, api.RunsOnLeader, s.keepAliveOne},
		{"GET", api.PathWorker, api.AccessSelection, api.RunsOnLeaderIfLinearizable, s.getWorker},
		{"PATCH", api.PathWorker, api.AccessAdmin, api.RunsOnLeader, s.patchWorker},
		{"DELETE", api.PathWorker, api.AccessAdmin, api.RunsOnLeader, s.deleteWorker},

		{"POST", api.PathSelect, api.AccessSelection, api.RunsOnAny, s.selectWorker},
		{"POST", api.PathSelectAndReserve, api.AccessSelection, api.RunsOnAny, s.selectAndReserve},
		{"POST", api.PathReservations, api.AccessSelection, api.RunsOnAny, s.createReservation},
		{"GET", api.PathReservations, api.AccessSelection, api.RunsOnAny, s.listReservations},
		{"GET", api.PathReservation, api.AccessSelection, api.RunsOnAny, s.getReservation},
		{"DELETE", api.PathReservation, api.AccessSelection, api.RunsOnAny, s.deleteReservation},
		{"POST", api.PathPrefillComplete, api.AccessSelection, api.RunsOnAny, s.prefillComplete},
		{"POST", api.PathOutputBlock, api.AccessSelection, api.RunsOnAny, s.outputBlock},

		{"GET", api.PathLoads, api.AccessSelection, api.RunsOnAny, s.loads},
		{"POST", api.PathPotentialLoads, api.AccessSelection, api.RunsOnAny, s.potentialLoads},
		{"POST", api.PathOverlapScores, api.AccessSelection, api.RunsOnAny, s.overlapScores},
		{"GET", api.PathDump, api.AccessAdmin, api.RunsOnAny, s.dump},

		{"GET", api.PathBusyThreshold, api.AccessSelection, api.RunsOnLeaderIfLinearizable, s.listBusyThresholds},
		{"POST", api.PathBusyThreshold, api.AccessAdmin, api.RunsOnLeader, s.setBusyThreshold},
		{"DELETE", api.PathBusyThreshold, api.AccessAdmin, api.RunsOnLeader, s.clearBusyThreshold},

		{"GET", api.PathPolicies, api.AccessSelection, api.RunsOnLeaderIfLinearizable, s.listPolicies},
		{"PUT", api.PathPolicies, api.AccessAdmin, api.RunsOnLeader, s.setPolicy},
		{"DELETE", api.PathPolicies, api.AccessAdmin, api.RunsOnLeader, s.deletePolicy},

		{"GET", api.PathClusterStatus, api.AccessSelection, api.RunsOnAny, s.clusterStatus},
		{"POST", api.PathClusterJoin, api.AccessAdmin, api.RunsOnLeader, s.clusterJoin},
		{"POST", api.PathClusterRemove, api.AccessAdmin, api.RunsOnLeader, s.clusterRemove},
		{"POST", api.PathClusterStepDown, api.AccessAdmin, api.RunsOnLeader, s.clusterStepDown},
		{"POST", api.PathClusterMetadata, api.AccessAdmin, api.RunsOnLeader, s.clusterMetadata},

		{"POST", api.PathReplicaSyncRegister, api.AccessAdmin, api.RunsOnAny, s.registerPeer},
		{"POST", api.PathReplicaSyncDeregister, api.AccessAdmin, api.RunsOnAny, s.deregisterPeer},
		{"GET", api.PathReplicaSyncPeers, api.AccessInspect, api.RunsOnAny, s.replicaSyncPeers},
		{"GET", api.PathReplicaSyncStatus, api.AccessInspect, api.RunsOnAny, s.replicaSyncStatus},
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
		if _, ok := accessTable[rt.access]; !ok {
			panic("http: route " + rt.method + " " + rt.path + " has no access class " + rt.access)
		}
		h := rt.h
		switch rt.where {
		case api.RunsOnLeader:
			h = s.leaderRoute(h)
		case api.RunsOnLeaderIfLinearizable:
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
