package main

import (
	"context"
	"time"

	"github.com/spf13/cobra"

	"github.com/kvselect/kvselect/api"
	"github.com/kvselect/kvselect/client"
)

func reservationsCmd(e *env) *cobra.Command {
	return group("reservations", "the node's bookings", reservationsListCmd(e), reservationsShowCmd(e), reservationsFreeCmd(e))
}

func reservationsListCmd(e *env) *cobra.Command {
	var q api.ReservationsQuery
	var worker uint64
	cmd := leaf("list", "the node's bookings, sorted by id, a page at a time (GET /reservations)", 0, 0,
		func(cmd *cobra.Command, _ []string) error {
			if cmd.Flags().Changed("worker") {
				q.WorkerID = &worker
			}
			return show(e, func(ctx context.Context, c *client.Client) (*api.ReservationPage, error) {
				return c.Reservations(ctx, q)
			}, func(p *printer, page *api.ReservationPage, _ *client.ResponseInfo) error {
				if err := printReservations(p, page.Reservations); err != nil {
					return err
				}
				if page.NextCursor != "" {
					p.linef("\nmore: kvselectctl reservations list --cursor %s", page.NextCursor)
				}
				return nil
			})
		})
	fs := cmd.Flags()
	fs.StringVar(&q.ModelName, "model", "", "only bookings of this model_name")
	fs.StringVar(&q.TenantID, "tenant", "", "only bookings of this tenant_id")
	fs.Uint64Var(&worker, "worker", 0, "only bookings on this worker_id")
	fs.IntVar(&q.Limit, "limit", api.DefaultReservationsLimit, "bookings per page")
	fs.StringVar(&q.Cursor, "cursor", "", "the next_cursor of the previous page")
	return cmd
}

func reservationsShowCmd(e *env) *cobra.Command {
	cmd := leaf("show <id>", "one booking (GET /reservations/{id}); also: get <id>", 1, 1,
		func(_ *cobra.Command, pos []string) error {
			return show(e, func(ctx context.Context, c *client.Client) (*api.ReservationInfo, error) {
				return c.Reservation(ctx, pos[0])
			}, func(p *printer, r *api.ReservationInfo, _ *client.ResponseInfo) error {
				return printReservations(p, []api.ReservationInfo{*r})
			})
		})
	cmd.Aliases = []string{"get"} // as in "workers get"
	return cmd
}

func reservationsFreeCmd(e *env) *cobra.Command {
	cmd := leaf("free <id>", "end a booking and release its load (DELETE /reservations/{id})", 1, 1,
		func(_ *cobra.Command, pos []string) error {
			c, err := e.client()
			if err != nil {
				return err
			}
			var info client.ResponseInfo
			if err := c.Free(client.WithResponseInfo(e.ctx, &info), pos[0]); err != nil {
				return err
			}
			p := e.out()
			if p.json {
				return p.indented(info.Body)
			}
			p.linef("reservation %s freed on %s", pos[0], info.Node)
			return nil
		})
	cmd.Long = `End a booking (DELETE /reservations/{id}), as the caller that made it does
when its request finishes: the node drops the booking's prefill and decode
load, and replica sync tells the other nodes. Use it for a booking whose
caller died; the sweep would otherwise free it only at its expiry (300 s
after admission by default). Any node will do: a node frees a booking
mirrored from a peer too. Unknown id (never booked, or freed already):
not_found, exit 1. A free is never sent twice.`
	cmd.Example = `  kvselectctl reservations list --worker 3
  kvselectctl reservations free req-1`
	return cmd
}

// printReservations prints one row per booking; ages are from now.
func printReservations(p *printer, rs []api.ReservationInfo) error {
	rows := make([][]string, 0, len(rs))
	for _, r := range rs {
		origin := r.Origin
		if r.OriginNode != "" {
			origin += ":" + r.OriginNode
		}
		rows = append(rows, []string{r.ReservationID, r.ModelName, r.TenantID, formatUint(r.WorkerID),
			formatUint(uint64(r.DPRank)), formatInt(int64(r.Blocks)), formatInt(r.PrefillTokens), yesNo(r.PrefillComplete),
			formatInt(r.OutputBlocks), time.Since(r.AdmittedAt).Round(time.Second).String(), origin})
	}
	return p.table([]string{"RESERVATION", "MODEL", "TENANT", "WORKER", "RANK", "BLOCKS", "PREFILL_TOKENS",
		"PREFILL_DONE", "OUTPUT_BLOCKS", "AGE", "ORIGIN"}, rows)
}
