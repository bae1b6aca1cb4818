package server_test

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/kvselect/kvselect/cluster"
	"github.com/kvselect/kvselect/internal/benchutil"
	"github.com/kvselect/kvselect/server"
	"github.com/kvselect/kvselect/server/servertest"
)

// BenchmarkCatalogWrite measures catalog write latency over HTTP (POST
// /workers, fsync on: raft-boltdb syncs every append) on a 3-node loopback
// cluster, sent to the leader and to a follower (which forwards), against
// a single-node cluster as the baseline in the same run. One write at a
// time: this is latency, not throughput.
func BenchmarkCatalogWrite(b *testing.B) {
	// Production Raft timing, so the figure is what an operator gets.
	production := func(_ int, cfg *server.Config) {
		def := cluster.DefaultConfig()
		cfg.Cluster.CommitTimeout = def.CommitTimeout
		cfg.Cluster.HeartbeatTimeout, cfg.Cluster.ElectionTimeout = def.HeartbeatTimeout, def.ElectionTimeout
		cfg.Cluster.LeaderLeaseTimeout = def.LeaderLeaseTimeout
	}
	for _, tc := range []struct {
		name  string
		nodes int
		via   func(c *servertest.Cluster) *server.Server
	}{
		{"single-node-baseline", 1, func(c *servertest.Cluster) *server.Server { return c.Leader() }},
		{"3-nodes/leader", 3, func(c *servertest.Cluster) *server.Server { return c.Leader() }},
		{"3-nodes/follower", 3, func(c *servertest.Cluster) *server.Server { return c.Followers()[0] }},
	} {
		b.Run(tc.name, func(b *testing.B) {
			c := servertest.StartCluster(b, tc.nodes, production)
			url := tc.via(c).URL() + "/workers"
			client := &http.Client{Timeout: 30 * time.Second}
			lat := make([]time.Duration, 0, b.N)
			b.ResetTimer()
			for i := range b.N {
				body := fmt.Sprintf(`{"worker_id": %d, "model_name": "m", "endpoint": "http://w", "block_size": 16,
					"kv_events_endpoint": "tcp://127.0.0.1:1"}`, i%64+1)
				start := time.Now()
				resp, err := client.Post(url, "application/json", strings.NewReader(body))
				if err != nil {
					b.Fatal(err)
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusCreated {
					b.Fatalf("write %d: %d", i, resp.StatusCode)
				}
				lat = append(lat, time.Since(start))
			}
			b.StopTimer()
			benchutil.ReportPercentiles(b, lat)
		})
	}
}
