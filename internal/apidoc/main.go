// Command apidoc writes the HTTP API reference (docs/api.md) from the
// OpenAPI document a node serves at GET /openapi.json (api/openapi.json).
// The reference is never edited by hand: `make docs` runs
//
//	go run ./internal/apidoc -in api/openapi.json -out docs/api.md
//
// and Test_APIDocMatchesOpenAPI fails when docs/api.md is not what this
// command makes from the current document, so the two cannot drift.
// Besides the api package's constants, standard library only.
package main

import (
	"flag"
	"fmt"
	"os"
)

func main() {
	in := flag.String("in", "api/openapi.json", "the OpenAPI document to read")
	out := flag.String("out", "docs/api.md", "the Markdown reference to write")
	flag.Parse()
	if err := run(*in, *out); err != nil {
		fmt.Fprintln(os.Stderr, "apidoc:", err)
		os.Exit(1)
	}
}

func run(in, out string) error {
	doc, err := os.ReadFile(in)
	if err != nil {
		return fmt.Errorf("read the document: %w", err)
	}
	md, err := Render(doc)
	if err != nil {
		return fmt.Errorf("render %s: %w", in, err)
	}
	if err := os.WriteFile(out, md, 0o644); err != nil {
		return fmt.Errorf("write the reference: %w", err)
	}
	return nil
}
