package main

import (
	"encoding/json"
	"flag"
	"net/http"
	"strconv"
	"strings"
)

// selection is the answer of /select and /select_and_reserve.
type selection struct {
	ReservationID string `json:"reservation_id"`
	ModelName     string `json:"model_name"`
	TenantID      string `json:"tenant_id"`
	WorkerID      uint64 `json:"worker_id"`
	DPRank        uint32 `json:"dp_rank"`
	Endpoint      string `json:"endpoint"`
	Overlap       struct {
		GPU  int64 `json:"gpu"`
		CPU  int64 `json:"cpu"`
		Disk int64 `json:"disk"`
	} `json:"overlap"`
	EffectivePrefillTokens int64 `json:"effective_prefill_tokens"`
}

// selectFlags are select's flags.
type selectFlags struct {
	model, tenant, tokens, jsonBody, reserve string
	minIndex                                 uint64
}

func selectCmd(e *env, args []string) error {
	fs := e.flags()
	var sf selectFlags
	fs.StringVar(&sf.model, "model", "", "model_name")
	fs.StringVar(&sf.tenant, "tenant", "", "tenant_id")
	fs.StringVar(&sf.tokens, "tokens", "", "the prompt as comma-separated token ids: `1,2,3`")
	fs.StringVar(&sf.jsonBody, "json-body", "", "the request body as a JSON object, or @file (flags given too override its fields)")
	fs.Uint64Var(&sf.minIndex, "min-index", 0, "min_catalog_index: wait until the node has applied this catalog index")
	fs.StringVar(&sf.reserve, "reserve", "", "book the selection with this reservation_id (/select_and_reserve; \"\" lets the node pick one)")
	if _, err := e.parse(fs, args, 0, 0); err != nil {
		return err
	}
	reserve := given(fs, "reserve")
	body, err := sf.body(reserve)
	if err != nil {
		return err
	}
	c, err := e.client()
	if err != nil {
		return err
	}
	path := "/select"
	if reserve {
		path = "/select_and_reserve"
	}
	resp, err := c.read(e.ctx, request{method: http.MethodPost, path: path, body: body})
	if err != nil {
		return err
	}
	return show(e.out(), resp, func(p *printer, s selection) error { return printSelection(p, s, reserve) })
}

// body builds the request from --json-body or --tokens plus the other
// flags.
func (sf *selectFlags) body(reserve bool) ([]byte, error) {
	if (sf.tokens == "") == (sf.jsonBody == "") {
		return nil, usageErrorf("select: give the prompt as --tokens or --json-body, one of them")
	}
	fields := map[string]json.RawMessage{}
	if sf.jsonBody != "" {
		raw, err := jsonArg(sf.jsonBody)
		if err != nil {
			return nil, err
		}
		if err := json.Unmarshal(raw, &fields); err != nil {
			return nil, usageErrorf("--json-body: %v", err)
		}
	} else {
		tokens, err := parseTokens(sf.tokens)
		if err != nil {
			return nil, err
		}
		fields["token_ids"] = tokens
	}
	setString(fields, "model_name", sf.model)
	setString(fields, "tenant_id", sf.tenant)
	if sf.minIndex > 0 {
		fields["min_catalog_index"] = json.RawMessage(strconv.FormatUint(sf.minIndex, 10))
	}
	if reserve {
		setString(fields, "reservation_id", sf.reserve)
	}
	return json.Marshal(fields)
}

// parseTokens turns "1,2,3" into the JSON array [1,2,3].
func parseTokens(list string) (json.RawMessage, error) {
	parts := strings.Split(list, ",")
	out := make([]byte, 0, 4*len(parts)+2)
	out = append(out, '[')
	for i, p := range parts {
		v, err := strconv.ParseUint(strings.TrimSpace(p), 10, 32)
		if err != nil {
			return nil, usageErrorf("--tokens: %q is not a token id (an unsigned 32-bit integer)", p)
		}
		if i > 0 {
			out = append(out, ',')
		}
		out = strconv.AppendUint(out, v, 10)
	}
	return append(out, ']'), nil
}

func setString(fields map[string]json.RawMessage, name, value string) {
	if value != "" {
		fields[name], _ = json.Marshal(value)
	}
}

// given reports whether a flag was set on the command line.
func given(fs *flag.FlagSet, name string) bool {
	found := false
	fs.Visit(func(f *flag.Flag) { found = found || f.Name == name })
	return found
}

func printSelection(p *printer, s selection, reserve bool) error {
	header := []string{"WORKER", "DP_RANK", "ENDPOINT", "OVERLAP_GPU", "OVERLAP_CPU", "OVERLAP_DISK", "EFFECTIVE_PREFILL_TOKENS"}
	row := []string{formatUint(s.WorkerID), formatUint(uint64(s.DPRank)), orDash(s.Endpoint),
		formatInt(s.Overlap.GPU), formatInt(s.Overlap.CPU), formatInt(s.Overlap.Disk), formatInt(s.EffectivePrefillTokens)}
	if reserve {
		header, row = append(header, "RESERVATION"), append(row, s.ReservationID)
	}
	return p.table(header, [][]string{row})
}
