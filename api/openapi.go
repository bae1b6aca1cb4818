package api

import _ "embed"

//go:embed openapi.json
var openAPI []byte

// OpenAPI returns the OpenAPI 3.1 document of the whole HTTP API (served
// at PathOpenAPI). The caller must not modify it.
func OpenAPI() []byte { return openAPI }
