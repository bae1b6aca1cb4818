package main

import (
	"context"
	"strconv"

	"github.com/spf13/cobra"

	"github.com/kvselect/kvselect/api"
	"github.com/kvselect/kvselect/client"
)

// Busy thresholds of load shedding (seed 001).

func thresholdsCmd(e *env) *cobra.Command {
	return group("thresholds", "every model's busy thresholds of load shedding",
		thresholdsListCmd(e), thresholdsSetCmd(e), thresholdsClearCmd(e))
}

func thresholdsListCmd(e *env) *cobra.Command {
	var lin bool
	cmd := leaf("list", "every model's busy thresholds (GET /busy_threshold)", 0, 0,
		func(*cobra.Command, []string) error {
			return show(e, func(ctx context.Context, c *client.Client) (*api.BusyThresholds, error) {
				return c.BusyThresholds(ctx, lin)
			}, func(p *printer, ts *api.BusyThresholds, _ *client.ResponseInfo) error {
				if len(ts.Thresholds) == 0 {
					p.linef("no busy thresholds: no worker is ever shed")
					return nil
				}
				return p.table([]string{"MODEL", "DECODE_BLOCKS", "PREFILL_TOKENS"}, thresholdRows(ts.Thresholds...))
			})
		})
	linearizableFlag(cmd.Flags(), &lin)
	return cmd
}

func thresholdsSetCmd(e *env) *cobra.Command {
	var req api.BusyThresholdRequest
	cmd := leaf("set <model> [--decode F] [--prefill N]", "set a model's busy thresholds, keeping the other (POST /busy_threshold)", 1, 1,
		func(_ *cobra.Command, pos []string) error {
			if req.ActiveDecodeBlocksThreshold == nil && req.ActivePrefillTokensThreshold == nil {
				return usageErrorf("thresholds set: give --decode and/or --prefill (to clear, use thresholds clear)")
			}
			req.Model = pos[0]
			return thresholdWrite(e, func(ctx context.Context, c *client.Client) (*api.BusyThreshold, error) {
				return c.SetBusyThreshold(ctx, req)
			})
		})
	fs := cmd.Flags()
	fs.Func("decode", "active_decode_blocks_threshold: a `fraction` 0-1 of a rank's total_kv_blocks", func(v string) error {
		f, err := strconv.ParseFloat(v, 64)
		if err != nil {
			return err
		}
		req.ActiveDecodeBlocksThreshold = &f
		return nil
	})
	fs.Func("prefill", "active_prefill_tokens_threshold: active prefill `tokens` of a rank", func(v string) error {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return err
		}
		req.ActivePrefillTokensThreshold = &n
		return nil
	})
	return cmd
}

func thresholdsClearCmd(e *env) *cobra.Command {
	return leaf("clear <model>", "unset a model's busy thresholds: its workers are never shed (DELETE /busy_threshold)", 1, 1,
		func(_ *cobra.Command, pos []string) error {
			return thresholdWrite(e, func(ctx context.Context, c *client.Client) (*api.BusyThreshold, error) {
				return c.ClearBusyThreshold(ctx, pos[0])
			})
		})
}

func thresholdWrite(e *env, write func(ctx context.Context, c *client.Client) (*api.BusyThreshold, error)) error {
	return show(e, write, func(p *printer, t *api.BusyThreshold, info *client.ResponseInfo) error {
		if err := p.table([]string{"MODEL", "DECODE_BLOCKS", "PREFILL_TOKENS"}, thresholdRows(*t)); err != nil {
			return err
		}
		p.applied(info, 0)
		return nil
	})
}

func thresholdRows(ts ...api.BusyThreshold) [][]string {
	rows := make([][]string, 0, len(ts))
	for _, t := range ts {
		decode, prefill := "-", "-"
		if t.ActiveDecodeBlocksThreshold != nil {
			decode = formatFloat(*t.ActiveDecodeBlocksThreshold)
		}
		if t.ActivePrefillTokensThreshold != nil {
			prefill = formatUint(*t.ActivePrefillTokensThreshold)
		}
		rows = append(rows, []string{t.Model, decode, prefill})
	}
	return rows
}
