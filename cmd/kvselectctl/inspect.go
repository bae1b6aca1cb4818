package main

import (
	"context"
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/kvselect/kvselect/api"
	"github.com/kvselect/kvselect/client"
)

func loadsCmd(e *env) *cobra.Command {
	var model, tenant string
	cmd := leaf("loads", "active load of every rank, per partition (GET /loads)", 0, 0,
		func(*cobra.Command, []string) error {
			return show(e, func(ctx context.Context, c *client.Client) ([]api.PartitionLoads, error) {
				return c.Loads(ctx, model, tenant)
			}, func(p *printer, parts []api.PartitionLoads, _ *client.ResponseInfo) error {
				return printLoads(p, parts)
			})
		})
	cmd.Flags().StringVar(&model, "model", "", "only this model_name")
	cmd.Flags().StringVar(&tenant, "tenant", "", "only this tenant_id")
	return cmd
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

func dumpCmd(e *env) *cobra.Command {
	var file string
	cmd := leaf("dump", "the index snapshot (GET /dump): as the server sends it, or indented with --json", 0, 0,
		func(*cobra.Command, []string) error { return dump(e, file) })
	cmd.Flags().StringVar(&file, "out", "", "write the dump to this `file` instead of stdout")
	_ = cmd.MarkFlagFilename("out", "json")
	return cmd
}

// dump writes the index dump: as the server sent it (compact, what a node
// loads), or indented with --json, like every --json output.
func dump(e *env, file string) error {
	c, err := e.client()
	if err != nil {
		return err
	}
	var info client.ResponseInfo
	if _, err := c.Dump(client.WithResponseInfo(e.ctx, &info)); err != nil {
		return err
	}
	body := info.Body
	if e.g.json {
		body = indentJSON(body)
	}
	if file == "" {
		_, err = e.stdout.Write(body)
		return err
	}
	if err := os.WriteFile(file, body, 0o644); err != nil {
		return fmt.Errorf("--out: %w", err)
	}
	if !e.g.json {
		e.out().linef("wrote %d bytes to %s", len(body), file)
	}
	return nil
}
