package kvsim

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"

	"github.com/kvselect/kvselect/api"
)

// The control API of a running kvsim (cmd/kvsim --control), defined once
// here for its server and its clients:
//
//	GET  /workers               → the registrations of every worker
//	GET  /workers/{id}          → that worker's registration
//	POST /workers/{id}/prompt   WorkerPromptRequest → ServeResult
//	POST /prompt                PromptRequest → ServeResult
//	POST /reset                 RankRequest → {"status": "ok"}
//	POST /restart               RankRequest → {"status": "ok"}
//
// /workers/{id} is the endpoint each worker registers with kvselect, so a
// caller that got a worker from /select sends the request to
// selection.endpoint + "/prompt", as it would to a real engine. Errors
// are an ErrorBody: 400 for a bad body, 404 for an unknown worker, rank
// or route, 405 for a wrong method.
const (
	PathWorkers = "/workers"
	PathPrompt  = "/prompt"
	PathReset   = "/reset"
	PathRestart = "/restart"
)

// WorkerPath is the path of worker id's own endpoint, "/workers/{id}".
func WorkerPath(id uint64) string { return PathWorkers + "/" + strconv.FormatUint(id, 10) }

// PromptRequest is the body of POST /prompt.
type PromptRequest struct {
	WorkerID *uint64  `json:"worker_id"`
	DPRank   int      `json:"dp_rank"` // default 0
	TokenIDs []uint32 `json:"token_ids"`
}

// WorkerPromptRequest is the body of POST /workers/{id}/prompt: the
// worker is in the path.
type WorkerPromptRequest struct {
	DPRank   int      `json:"dp_rank"` // default 0
	TokenIDs []uint32 `json:"token_ids"`
}

// RankRequest is the body of POST /reset and POST /restart: one rank, or
// every rank when DPRank is nil.
type RankRequest struct {
	WorkerID *uint64 `json:"worker_id"`
	DPRank   *int    `json:"dp_rank"`
}

// ErrorBody is every error answer of the control API.
type ErrorBody struct {
	Error string `json:"error"`
}

// ErrControl is what ControlClient wraps when kvsim answers a call with
// an error status.
var ErrControl = errors.New("kvsim control API refused the call")

// ControlClient calls a kvsim's control API. Its zero HTTP uses
// http.DefaultClient; give one with a timeout.
type ControlClient struct {
	BaseURL string // e.g. http://127.0.0.1:7000
	HTTP    *http.Client
}

// Workers lists every worker's registration.
func (c *ControlClient) Workers(ctx context.Context) ([]api.WorkerFields, error) {
	var regs []api.WorkerFields
	return regs, c.call(ctx, http.MethodGet, PathWorkers, nil, &regs)
}

// Worker is worker id's registration.
func (c *ControlClient) Worker(ctx context.Context, id uint64) (api.WorkerFields, error) {
	var reg api.WorkerFields
	return reg, c.call(ctx, http.MethodGet, WorkerPath(id), nil, &reg)
}

// Prompt has worker's rank serve tokens (storing and evicting blocks,
// each published as a KV event).
func (c *ControlClient) Prompt(ctx context.Context, worker uint64, rank int, tokens []uint32) (ServeResult, error) {
	var res ServeResult
	return res, c.call(ctx, http.MethodPost, PathPrompt, PromptRequest{WorkerID: &worker, DPRank: rank, TokenIDs: tokens}, &res)
}

// Reset empties the cache of worker's rank (AllRanks: every rank).
func (c *ControlClient) Reset(ctx context.Context, worker uint64, rank int) error {
	return c.call(ctx, http.MethodPost, PathReset, rankRequest(worker, rank), nil)
}

// Restart restarts the engine of worker's rank (AllRanks: every rank).
func (c *ControlClient) Restart(ctx context.Context, worker uint64, rank int) error {
	return c.call(ctx, http.MethodPost, PathRestart, rankRequest(worker, rank), nil)
}

func rankRequest(worker uint64, rank int) RankRequest {
	req := RankRequest{WorkerID: &worker}
	if rank != AllRanks {
		req.DPRank = &rank
	}
	return req
}

// call sends body (nil: none) and decodes a 200 answer into out (nil:
// ignored); any other status is ErrControl with kvsim's message.
func (c *ControlClient) call(ctx context.Context, method, path string, body, out any) error {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, strings.TrimSuffix(c.BaseURL, "/")+path, rd)
	if err != nil {
		return err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	hc := c.HTTP
	if hc == nil {
		hc = http.DefaultClient
	}
	resp, err := hc.Do(req)
	if err != nil {
		return fmt.Errorf("kvsim %s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		var e ErrorBody
		if json.Unmarshal(msg, &e) == nil && e.Error != "" {
			msg = []byte(e.Error)
		}
		return fmt.Errorf("kvsim %s %s: %w: %s: %s", method, path, ErrControl, resp.Status, bytes.TrimSpace(msg))
	}
	if out == nil {
		_, _ = io.Copy(io.Discard, resp.Body)
		return nil
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		return fmt.Errorf("kvsim %s %s: %w", method, path, err)
	}
	return nil
}
