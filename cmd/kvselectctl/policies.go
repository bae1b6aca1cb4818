package main

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/kvselect/kvselect/api"
	"github.com/kvselect/kvselect/client"
)

// Selection policies as catalog state (SPEC §6.4).

func policiesCmd(e *env) *cobra.Command {
	return group("policies", "the selection policy of each partition and of the cluster",
		policiesListCmd(e), policiesSetCmd(e), policiesDeleteCmd(e))
}

func policiesListCmd(e *env) *cobra.Command {
	var lin bool
	cmd := leaf("list", "every policy entry, and the answering node's default (GET /policies)", 0, 0,
		func(*cobra.Command, []string) error {
			return show(e, func(ctx context.Context, c *client.Client) (*api.Policies, error) {
				return c.Policies(ctx, lin)
			}, func(p *printer, ps *api.Policies, _ *client.ResponseInfo) error {
				if len(ps.Policies) == 0 {
					p.linef("no policy entries: every partition runs the node's default")
				} else if err := p.table(policyHeader, policyRows(ps.Policies...)); err != nil {
					return err
				}
				p.linef("node default (--policy): %s", policyString(ps.NodeDefault.Name, ps.NodeDefault.Parameters))
				return nil
			})
		})
	linearizableFlag(cmd.Flags(), &lin)
	return cmd
}

func policiesSetCmd(e *env) *cobra.Command {
	req := api.PolicyRequest{Parameters: api.PolicyParameters{}}
	cmd := leaf("set --model M [--tenant T] --policy P [--param name=value]...",
		"set a partition's policy, or with --model '*' the cluster default (PUT /policies)", 0, 0,
		func(*cobra.Command, []string) error {
			if req.ModelName == "" || req.Policy == "" {
				return usageErrorf("policies set: give --model and --policy")
			}
			return policyWrite(e, "stored", func(ctx context.Context, c *client.Client) (*api.PolicyWritten, error) {
				return c.SetPolicy(ctx, req)
			})
		})
	cmd.Long = `Set the selection policy of a partition (--model, --tenant), replacing its
entry, or with --model '*' (and no --tenant) the cluster default: the policy
of every partition without an entry of its own. Through the Raft log, so
every node ranks alike. --param gives a policy parameter, once per
parameter: true or false for a boolean one, a number otherwise; an unknown
policy or parameter is refused, naming those there are.`
	cmd.Example = `  kvselectctl policies set --model llama --tenant t --policy two-tier --param cache_threshold=0.6
  kvselectctl policies set --model '*' --policy dynamo-default --param assume_kv_reuse=false`
	fs := cmd.Flags()
	fs.StringVar(&req.ModelName, "model", "", "the model_name, or '*' for the cluster default")
	fs.StringVar(&req.TenantID, "tenant", "", `the tenant_id (default "default"; none with --model '*')`)
	fs.StringVar(&req.Policy, "policy", "", "the policy's name")
	fs.Func("param", "a policy parameter as `name=value` (repeatable): true, false or a number", func(v string) error {
		name, value, ok := strings.Cut(v, "=")
		if !ok || name == "" {
			return fmt.Errorf("%q is not name=value", v)
		}
		req.Parameters[name] = paramValue(value)
		return nil
	})
	return cmd
}

func policiesDeleteCmd(e *env) *cobra.Command {
	var model, tenant string
	cmd := leaf("delete --model M [--tenant T]",
		"remove a partition's policy, or with --model '*' the cluster default (DELETE /policies)", 0, 0,
		func(*cobra.Command, []string) error {
			if model == "" {
				return usageErrorf("policies delete: give --model")
			}
			return policyWrite(e, "removed", func(ctx context.Context, c *client.Client) (*api.PolicyWritten, error) {
				return c.DeletePolicy(ctx, model, tenant)
			})
		})
	cmd.Aliases = []string{"rm"}
	fs := cmd.Flags()
	fs.StringVar(&model, "model", "", "the model_name, or '*' for the cluster default")
	fs.StringVar(&tenant, "tenant", "", `the tenant_id (default "default"; none with --model '*')`)
	return cmd
}

// paramValue reads a --param value: a boolean as a JSON boolean, a number
// as a JSON number; anything else is sent as a string, which the server
// refuses naming the parameter and the kind it takes.
func paramValue(s string) any {
	switch s {
	case "true":
		return true
	case "false":
		return false
	}
	if f, err := strconv.ParseFloat(s, 64); err == nil {
		return f
	}
	return s
}

func policyWrite(e *env, verb string, write func(ctx context.Context, c *client.Client) (*api.PolicyWritten, error)) error {
	return show(e, write, func(p *printer, w *api.PolicyWritten, info *client.ResponseInfo) error {
		p.linef("policy of %s %s: %s", partitionName(w.ModelName, w.TenantID), verb, policyString(w.Name, w.Parameters))
		p.applied(info, w.CatalogIndex)
		return nil
	})
}

var policyHeader = []string{"MODEL", "TENANT", "POLICY", "PARAMETERS", "INDEX"}

func policyRows(ps ...api.Policy) [][]string {
	rows := make([][]string, 0, len(ps))
	for _, p := range ps {
		rows = append(rows, []string{p.ModelName, orDash(p.TenantID), p.Name, orDash(formatParams(p.Parameters)),
			formatUint(p.ModifyIndex)})
	}
	return rows
}

// partitionName is how a line names an entry's partition.
func partitionName(model, tenant string) string {
	if model == api.AnyModel {
		return "the cluster default (*)"
	}
	return fmt.Sprintf("model %s tenant %s", model, tenant)
}

// policyString is a policy with its parameters: two-tier(cache_threshold=0.6).
func policyString(name string, params api.PolicyParameters) string {
	if len(params) == 0 {
		return name
	}
	return name + "(" + formatParams(params) + ")"
}

// formatParams is "name=value,..." sorted by name.
func formatParams(params api.PolicyParameters) string {
	parts := make([]string, 0, len(params))
	for _, k := range slices.Sorted(maps.Keys(params)) {
		v := fmt.Sprint(params[k])
		if f, ok := params[k].(float64); ok {
			v = formatFloat(f)
		}
		parts = append(parts, k+"="+v)
	}
	return strings.Join(parts, ",")
}
