package http

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"

	"github.com/kvselect/kvselect/api"
)

// readBody reads the whole body, at most api.MaxBodyBytes. A small body
// whose length is announced is read into one buffer of that size; a large
// one grows with what arrives, so that announcing 8 MiB and sending
// nothing holds no memory.
func readBody(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	if n := r.ContentLength; n > 0 && n <= pooledBodyMax {
		body := make([]byte, n)
		if _, err := io.ReadFull(r.Body, body); err != nil {
			return nil, badRequest("", "reading body: %v", err)
		}
		return body, nil
	}
	return readBodyAll(w, r)
}

// pooledBodyMax bounds the bodies whose buffers withBody reuses; larger
// ones are rare (dumps, huge prompts) and would pin their memory.
const pooledBodyMax = 64 << 10

// bodyPool holds body buffers for withBody.
var bodyPool = sync.Pool{New: func() any { b := make([]byte, 0, 16<<10); return &b }}

// withBody reads the body into a pooled buffer, calls use with it and
// takes the buffer back: use must not keep the slice or anything that
// aliases it (the selection decoders copy what they keep).
func withBody(w http.ResponseWriter, r *http.Request, use func([]byte) error) error {
	n := r.ContentLength
	if n <= 0 || n > pooledBodyMax {
		body, err := readBody(w, r)
		if err != nil {
			return err
		}
		return use(body)
	}
	bp := bodyPool.Get().(*[]byte)
	defer bodyPool.Put(bp)
	if int64(cap(*bp)) < n {
		*bp = make([]byte, n)
	}
	body := (*bp)[:n]
	if _, err := io.ReadFull(r.Body, body); err != nil {
		return badRequest("", "reading body: %v", err)
	}
	return use(body)
}

// readBodyAll reads a body of unknown length, at most api.MaxBodyBytes.
func readBodyAll(w http.ResponseWriter, r *http.Request) ([]byte, error) {
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
	return decodeNonEmpty(body, optional, func(body []byte) error { return api.Decode(body, v) })
}

// decodePooled is decodeBody for the selection routes, with their own
// decoder (api.DecodeSelect, api.DecodePrompt), on a pooled buffer
// (withBody): decode must keep nothing that aliases the body.
func decodePooled(w http.ResponseWriter, r *http.Request, decode func([]byte) error) error {
	return withBody(w, r, func(body []byte) error { return decodeNonEmpty(body, false, decode) })
}

func decodeNonEmpty(body []byte, optional bool, decode func([]byte) error) error {
	if len(bytes.TrimSpace(body)) == 0 {
		if optional {
			return nil
		}
		return badRequest("", "request body is required (a JSON object)")
	}
	return fieldError(decode(body))
}

// decodeJSON decodes one JSON object strictly (api.Decode); a failure is
// a 400 naming the field.
func decodeJSON(body []byte, v any) error { return fieldError(api.Decode(body, v)) }

// fieldError turns a decoding failure into a 400 naming the field.
func fieldError(err error) error {
	if err != nil {
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
