package kvsim

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

// httpTimeout bounds every HTTP call the simulator makes to kvselect.
const httpTimeout = 30 * time.Second

// maxResponseBody bounds how much of a kvselect response is read.
const maxResponseBody = 1 << 20

var defaultHTTPClient = &http.Client{Timeout: httpTimeout}

// HTTPError is a kvselect answer with an unexpected status.
type HTTPError struct {
	Method, URL string
	StatusCode  int
	Body        string // the (truncated) response body
}

func (e *HTTPError) Error() string {
	return fmt.Sprintf("%s %s: status %d: %s", e.Method, e.URL, e.StatusCode, e.Body)
}

// Register registers every worker with the kvselect node at kvselectURL
// (POST /workers, expecting 201), stopping at the first failure. A
// rejection is returned as an *HTTPError carrying the response body.
func (s *Sim) Register(ctx context.Context, kvselectURL string) error {
	url := strings.TrimRight(kvselectURL, "/") + "/workers"
	for _, w := range s.workers {
		if err := postJSON(ctx, defaultHTTPClient, url, s.cfg.AuthToken, w.Registration(), http.StatusCreated, nil); err != nil {
			return fmt.Errorf("kvsim: register worker %d: %w", w.id, err)
		}
	}
	return nil
}

// postJSON posts body as JSON and, when the status is want, decodes the
// response into out (unless out is nil).
func postJSON(ctx context.Context, client *http.Client, url, token string, body any, want int, out any) error {
	payload, err := json.Marshal(body)
	if err != nil {
		return fmt.Errorf("encode request: %w", err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(payload))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxResponseBody))
	if err != nil {
		return fmt.Errorf("read response of %s: %w", url, err)
	}
	if resp.StatusCode != want {
		return &HTTPError{Method: http.MethodPost, URL: url, StatusCode: resp.StatusCode, Body: strings.TrimSpace(string(data))}
	}
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(data, out); err != nil {
		return fmt.Errorf("decode response of %s: %w", url, err)
	}
	return nil
}
