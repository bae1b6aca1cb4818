package main

import (
	"context"
	"fmt"
	"os"

	"github.com/kvselect/kvselect/api"
	"github.com/kvselect/kvselect/client"
)

func loadsCmd(e *env, args []string) error {
	fs := e.flags()
	model := fs.String("model", "", "only this model_name")
	tenant := fs.String("tenant", "", "only this tenant_id")
	if _, err := e.parse(fs, args, 0, 0); err != nil {
		return err
	}
	return show(e, func(ctx context.Context, c *client.Client) ([]api.PartitionLoads, error) {
		return c.Loads(ctx, *model, *tenant)
	}, func(p *printer, parts []api.PartitionLoads, _ *client.ResponseInfo) error {
		return printLoads(p, parts)
	})
}

// printLoads prints a title and a table per partition.
func printLoads(p *printer, parts []api.PartitionLoads) error {
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
				formatInt(l.ActivePrefillTokens), formatFloat(l.ActiveDecodeBlocks), formatInt(int64(l.ActiveRequests)), yesNo(l.Busy)})
		}
		if err := p.table([]string{"WORKER", "RANK", "PREFILL_TOKENS", "DECODE_BLOCKS", "REQUESTS", "BUSY"}, rows); err != nil {
			return err
		}
	}
	return nil
}

// dumpCmd writes the index dump as the server sent it.
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
	var info client.ResponseInfo
	if _, err := c.Dump(client.WithResponseInfo(e.ctx, &info)); err != nil {
		return err
	}
	if *out == "" {
		if e.g.json {
			return e.out().indented(info.Body)
		}
		_, err = e.stdout.Write(info.Body)
		return err
	}
	if err := os.WriteFile(*out, info.Body, 0o644); err != nil {
		return fmt.Errorf("--out: %w", err)
	}
	if !e.g.json {
		e.out().linef("wrote %d bytes to %s", len(info.Body), *out)
	}
	return nil
}
