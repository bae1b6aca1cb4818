package main

import (
	"fmt"
	"net/http"
	"os"
)

// partitionLoads is one partition of GET /loads.
type partitionLoads struct {
	ModelName string `json:"model_name"`
	TenantID  string `json:"tenant_id"`
	Loads     []struct {
		WorkerID            uint64  `json:"worker_id"`
		DPRank              uint32  `json:"dp_rank"`
		ActivePrefillTokens int64   `json:"active_prefill_tokens"`
		ActiveDecodeBlocks  float64 `json:"active_decode_blocks"`
		ActiveRequests      int64   `json:"active_requests"`
	} `json:"loads"`
}

func loadsCmd(e *env, args []string) error {
	fs := e.flags()
	model := fs.String("model", "", "only this model_name")
	tenant := fs.String("tenant", "", "only this tenant_id")
	if _, err := e.parse(fs, args, 0, 0); err != nil {
		return err
	}
	c, err := e.client()
	if err != nil {
		return err
	}
	resp, err := c.read(e.ctx, request{method: http.MethodGet, path: withEncodedQuery("/loads", partitionQuery(*model, *tenant))})
	if err != nil {
		return err
	}
	return show(e.out(), resp, printLoads)
}

// printLoads prints a title and a table per partition.
func printLoads(p *printer, parts []partitionLoads) error {
	if len(parts) == 0 {
		p.linef("no partitions")
	}
	for i, part := range parts {
		if i > 0 {
			p.linef("")
		}
		p.linef("model %s  tenant %s", part.ModelName, part.TenantID)
		rows := make([][]string, 0, len(part.Loads))
		for _, l := range part.Loads {
			rows = append(rows, []string{formatUint(l.WorkerID), formatUint(uint64(l.DPRank)),
				formatInt(l.ActivePrefillTokens), formatFloat(l.ActiveDecodeBlocks), formatInt(l.ActiveRequests)})
		}
		if err := p.table([]string{"WORKER", "RANK", "PREFILL_TOKENS", "DECODE_BLOCKS", "REQUESTS"}, rows); err != nil {
			return err
		}
	}
	return nil
}

func dumpCmd(e *env, args []string) error {
	fs := e.flags()
	out := fs.String("out", "", "write the dump to this `file` instead of stdout")
	if _, err := e.parse(fs, args, 0, 0); err != nil {
		return err
	}
	c, err := e.client()
	if err != nil {
		return err
	}
	resp, err := c.read(e.ctx, request{method: http.MethodGet, path: "/dump"})
	if err != nil {
		return err
	}
	if *out == "" {
		_, err = e.stdout.Write(resp.body)
		return err
	}
	if err := os.WriteFile(*out, resp.body, 0o644); err != nil {
		return fmt.Errorf("--out: %w", err)
	}
	if !e.g.json {
		e.out().linef("wrote %d bytes to %s", len(resp.body), *out)
	}
	return nil
}
