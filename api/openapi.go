package api

import _ "embed"

//go:embed openapi.json
var openAPI []byte

// OpenAPI returns the OpenAPI 3.1 document of the whole HTTP API (served
// at PathOpenAPI). The caller must not modify it.
func OpenAPI() []byte { return openAPI }

// Who may call a route, as the OpenAPI document's x-kvselect-access says
// and the router enforces (SPEC §11).
const (
	// AccessOpen routes never need a token.
	AccessOpen = "open"
	// AccessSelection routes need the token only with --auth-scope all.
	AccessSelection = "selection"
	// AccessAdmin routes need it whenever --auth-token-file is set.
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
