package main

import (
	"context"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/kvselect/kvselect/api"
	"github.com/kvselect/kvselect/client"
)

// selectFlags are select's flags.
type selectFlags struct {
	model, tenant, tokens, jsonBody, reserve, selectionID string
	minIndex                                              uint64
}

func selectCmd(e *env) *cobra.Command {
	var sf selectFlags
	cmd := leaf("select", "choose a worker and rank for a prompt (POST /select); with --reserve, book it too (/select_and_reserve)", 0, 0,
		func(cmd *cobra.Command, _ []string) error {
			reserve := cmd.Flags().Changed("reserve")
			req, err := sf.request(reserve)
			if err != nil {
				return err
			}
			return show(e, func(ctx context.Context, c *client.Client) (*api.Selection, error) {
				if reserve {
					return c.SelectAndReserve(ctx, req)
				}
				return c.Select(ctx, req)
			}, func(p *printer, s *api.Selection, _ *client.ResponseInfo) error { return printSelection(p, s, reserve) })
		})
	cmd.Example = `  kvselectctl select --model llama --tokens 1,2,3,4
  kvselectctl select --model llama --tokens 1,2,3,4 --reserve req-1
  kvselectctl select --json-body @prompt.json --min-index 42`
	fs := cmd.Flags()
	fs.StringVar(&sf.model, "model", "", "model_name")
	fs.StringVar(&sf.tenant, "tenant", "", "tenant_id")
	fs.StringVar(&sf.tokens, "tokens", "", "the prompt as comma-separated token ids: `1,2,3`")
	fs.StringVar(&sf.jsonBody, "json-body", "", "the request body as a JSON object, or @file (flags given too override its fields)")
	fs.Uint64Var(&sf.minIndex, "min-index", 0, "min_catalog_index: wait until the node has applied this catalog index")
	fs.StringVar(&sf.reserve, "reserve", "", "book the selection with this reservation_id (/select_and_reserve; \"\" lets the node pick one)")
	fs.StringVar(&sf.selectionID, "selection-id", "", "selection_id: the node remembers the choice for 60 s, for POST /reservations")
	return cmd
}

// request builds the request from --json-body or --tokens plus the other
// flags.
func (sf *selectFlags) request(reserve bool) (api.SelectRequest, error) {
	var req api.SelectRequest
	if (sf.tokens == "") == (sf.jsonBody == "") {
		return req, usageErrorf("select: give the prompt as --tokens or --json-body, one of them")
	}
	if sf.jsonBody != "" {
		if err := jsonArg("--json-body", sf.jsonBody, &req); err != nil {
			return req, err
		}
	} else {
		tokens, err := parseTokens(sf.tokens)
		if err != nil {
			return req, err
		}
		req.TokenIDs = tokens
	}
	setIfGiven(&req.ModelName, sf.model)
	setIfGiven(&req.TenantID, sf.tenant)
	if sf.minIndex > 0 {
		req.MinCatalogIndex = sf.minIndex
	}
	for _, id := range []struct {
		flag string
		dst  *api.ID
		v    string
	}{{"--selection-id", &req.SelectionID, sf.selectionID}, {"--reserve", &req.ReservationID, sf.reserve}} {
		if id.v == "" {
			continue
		}
		if err := api.ValidateID(id.v); err != nil {
			return req, usageErrorf("%s: %v", id.flag, err)
		}
		*id.dst = api.ID(id.v)
	}
	if !reserve && req.ReservationID != "" {
		return req, usageErrorf("select: reservation_id books a reservation: use --reserve")
	}
	return req, nil
}

// parseTokens turns "1,2,3" into token ids.
func parseTokens(list string) (api.TokenIDs, error) {
	parts := strings.Split(list, ",")
	out := make(api.TokenIDs, 0, len(parts))
	for _, p := range parts {
		v, err := strconv.ParseUint(strings.TrimSpace(p), 10, 32)
		if err != nil {
			return nil, usageErrorf("--tokens: %q is not a token id (an unsigned 32-bit integer)", p)
		}
		out = append(out, uint32(v))
	}
	return out, nil
}

func setIfGiven(dst *string, v string) {
	if v != "" {
		*dst = v
	}
}

func printSelection(p *printer, s *api.Selection, reserve bool) error {
	header := []string{"WORKER", "DP_RANK", "ENDPOINT", "OVERLAP_GPU", "OVERLAP_CPU", "OVERLAP_DISK", "EFFECTIVE_PREFILL_TOKENS"}
	row := []string{formatUint(s.WorkerID), formatUint(uint64(s.DPRank)), orDash(s.Endpoint),
		formatInt(s.Overlap.GPU), formatInt(s.Overlap.CPU), formatInt(s.Overlap.Disk), formatInt(s.EffectivePrefillTokens)}
	if reserve {
		header, row = append(header, "RESERVATION"), append(row, s.ReservationID)
	}
	return p.table(header, [][]string{row})
}
