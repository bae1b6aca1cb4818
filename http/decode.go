package http

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/kvselect/kvselect/api"
)

// readBody reads the whole body, at most api.MaxBodyBytes.
func readBody(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, api.MaxBodyBytes))
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			return nil, fmt.Errorf("%w: limit is %d bytes", errTooLarge, api.MaxBodyBytes)
		}
		return nil, badRequest("", "reading body: %v", err)
	}
	return body, nil
}

// decodeBody reads and decodes a JSON object into v, turning every
// decoding failure into a 400 that names the field. An empty body is
// allowed only when optional is set (v is left untouched).
func decodeBody(w http.ResponseWriter, r *http.Request, v any, optional bool) error {
	body, err := readBody(w, r)
	if err != nil {
		return err
	}
	if len(bytes.TrimSpace(body)) == 0 {
		if optional {
			return nil
		}
		return badRequest("", "request body is required (a JSON object)")
	}
	return decodeJSON(body, v)
}

// decodeJSON decodes one JSON object strictly (api.Decode); a failure is
// a 400 naming the field.
func decodeJSON(body []byte, v any) error {
	if err := api.Decode(body, v); err != nil {
		var fe *api.FieldError
		if errors.As(err, &fe) {
			return badRequest(fe.Field, "%s", fe.Problem)
		}
		return badRequest("", "%v", err)
	}
	return nil
}

// checkID validates a reservation or selection id given in field.
func checkID(field, id string) error {
	if err := api.ValidateID(id); err != nil {
		return badRequest(field, "%s", strings.TrimPrefix(err.Error(), api.ErrBadID.Error()+": "))
	}
	return nil
}
