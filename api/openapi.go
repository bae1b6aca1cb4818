package api

import _ "embed"

//go:embed openapi.json
var openAPI []byte

// OpenAPI returns the OpenAPI 3.1 document of the whole HTTP API (served
// at PathOpenAPI). The caller must not modify it.
func OpenAPI() []byte { return openAPI }

// Who may call a route, as the OpenAPI document's x-kvselect-access says
// and the router enforces (SPEC §11). Without --auth-token-file every
// route is open. With it:
//
//	class      --auth-scope all (default)   --auth-scope admin
//	open       no token                     no token
//	selection  selection or admin token     no token
//	worker     selection or admin token     selection or admin token
//	inspect    admin token                  no token
//	admin      admin token                  admin token
//
// The selection token (--selection-token-file) on a route that needs the
// admin token answers 403 forbidden; no token, or a wrong one, 401.
const (
	// AccessOpen routes never need a token: the probes and this
	// document.
	AccessOpen = "open"
	// AccessSelection routes are what a Ray caller needs: selection,
	// bookings and their lifecycle, loads, and reads of the catalog,
	// policies, thresholds, cluster status and metrics.
	AccessSelection = "selection"
	// AccessWorker routes are writes a worker makes about itself (lease
	// keepalives): a token in either scope, the selection one will do.
	AccessWorker = "worker"
	// AccessInspect routes are inspection a Ray caller does not need
	// (replica-sync peers and status): the admin token with --auth-scope
	// all, open with --auth-scope admin.
	AccessInspect = "inspect"
	// AccessAdmin routes change the catalog, the cluster or replica sync,
	// or dump the index: the admin token in either scope.
	AccessAdmin = "admin"
)

// Which node answers a route, as the document's x-kvselect-runs-on says.
const (
	// RunsOnAny: the node that receives it, from local state.
	RunsOnAny = "any"
	// RunsOnLeader: the leader; followers forward (or redirect with
	// ?redirect=true).
	RunsOnLeader = "leader"
	// RunsOnLeaderIfLinearizable: the leader with
	// ?consistency=linearizable, else any node.
	RunsOnLeaderIfLinearizable = "leader_if_linearizable"
)
