package main

import (
	"context"
	"strconv"

	"github.com/kvselect/kvselect/api"
	"github.com/kvselect/kvselect/client"
)

// Busy thresholds of load shedding (seed 001).

func thresholdsListCmd(e *env, args []string) error {
	fs := e.flags()
	lin := fs.Bool("linearizable", false, "read on the leader after it confirms its leadership")
	if _, err := e.parse(fs, args, 0, 0); err != nil {
		return err
	}
	return show(e, func(ctx context.Context, c *client.Client) (*api.BusyThresholds, error) {
		return c.BusyThresholds(ctx, *lin)
	}, func(p *printer, ts *api.BusyThresholds, _ *client.ResponseInfo) error {
		if len(ts.Thresholds) == 0 {
			p.linef("no busy thresholds: no worker is ever shed")
			return nil
		}
		return p.table([]string{"MODEL", "DECODE_BLOCKS", "PREFILL_TOKENS"}, thresholdRows(ts.Thresholds...))
	})
}

func thresholdsSetCmd(e *env, args []string) error {
	fs := e.flags()
	var req api.BusyThresholdRequest
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
	pos, err := e.parse(fs, args, 1, 1)
	if err != nil {
		return err
	}
	if req.ActiveDecodeBlocksThreshold == nil && req.ActivePrefillTokensThreshold == nil {
		return usageErrorf("thresholds set: give --decode and/or --prefill (to clear, use thresholds clear)")
	}
	req.Model = pos[0]
	return thresholdWrite(e, func(ctx context.Context, c *client.Client) (*api.BusyThreshold, error) {
		return c.SetBusyThreshold(ctx, req)
	})
}

func thresholdsClearCmd(e *env, args []string) error {
	pos, err := e.parse(e.flags(), args, 1, 1)
	if err != nil {
		return err
	}
	return thresholdWrite(e, func(ctx context.Context, c *client.Client) (*api.BusyThreshold, error) {
		return c.ClearBusyThreshold(ctx, pos[0])
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
