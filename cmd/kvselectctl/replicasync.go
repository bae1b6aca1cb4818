package main

import (
	"context"
	"strings"

	"github.com/spf13/cobra"

	"github.com/kvselect/kvselect/api"
	"github.com/kvselect/kvselect/client"
)

// Replica sync of active load between nodes (SPEC §3.6).

func replicaSyncCmd(e *env) *cobra.Command {
	return group("replica-sync", "the replica-sync peers a node follows for the other nodes' bookings",
		replicaSyncStatusCmd(e), replicaSyncPeersCmd(e))
}

func replicaSyncStatusCmd(e *env) *cobra.Command {
	return leaf("status", "the node's replica-sync endpoint and each peer's source, state and counters (GET /replica_sync/status)", 0, 0,
		func(*cobra.Command, []string) error {
			return show(e, func(ctx context.Context, c *client.Client) (*api.ReplicaSyncStatus, error) {
				return c.ReplicaSyncStatus(ctx)
			}, func(p *printer, st *api.ReplicaSyncStatus, _ *client.ResponseInfo) error {
				if !st.Enabled {
					p.linef("replica sync is off on this node")
					return nil
				}
				p.linef("endpoint %s", st.Endpoint)
				rows := make([][]string, 0, len(st.Peers))
				for _, peer := range st.Peers {
					state := peer.State
					if peer.LastError != "" {
						state += " (" + peer.LastError + ")"
					}
					rows = append(rows, []string{peer.Endpoint, orDash(peer.NodeID), strings.Join(peer.Sources, ","), state,
						formatUint(peer.Messages), formatUint(peer.Events), formatUint(peer.DroppedEvents)})
				}
				return p.table([]string{"PEER", "NODE", "SOURCES", "STATE", "MESSAGES", "EVENTS", "DROPPED"}, rows)
			})
		})
}

func replicaSyncPeersCmd(e *env) *cobra.Command {
	return leaf("peers", "the endpoints the node follows, one per line (GET /replica_sync/peers, as Dynamo answers it)", 0, 0,
		func(*cobra.Command, []string) error {
			return show(e, func(ctx context.Context, c *client.Client) ([]string, error) {
				return c.ReplicaSyncPeers(ctx)
			}, func(p *printer, peers []string, _ *client.ResponseInfo) error {
				for _, ep := range peers {
					p.linef("%s", ep)
				}
				return nil
			})
		})
}
