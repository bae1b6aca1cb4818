package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/kvselect/kvselect/api"
)

// Test_MisregisteredWorkerCannotTakeOver runs three real kvselect
// processes through issue 23's takeover: workers 1, 2 and 4 registered
// with block_size 16 and worker 3, between them, with 32. Once 1 and 2 are
// deleted, the partition stays 16 on every node: worker 3 stays
// incomplete and /select never returns it, before and after a node is
// restarted from a snapshot taken after the deletes.
func Test_MisregisteredWorkerCannotTakeOver(t *testing.T) {
	c := startProcCluster(t, buildKvselect(t), 3,
		"--raft-snapshot-threshold", "1",
		"--raft-snapshot-interval", "100ms")
	leader := c.waitAgreement(30 * time.Second)
	client := &http.Client{Timeout: 5 * time.Second}
	write := func(method, path, body string, want int) uint64 {
		t.Helper()
		var index uint64
		c.eventually(method+" "+path, 20*time.Second, func() error {
			a, err := send(context.Background(), client, method, leader.url(path), body)
			if err != nil {
				return err
			}
			if a.status == http.StatusServiceUnavailable && notAcknowledged(a.code()) {
				return fmt.Errorf("%s %s: %v", method, path, a)
			}
			if a.status != want {
				t.Fatalf("%s %s = %v, want %d", method, path, a, want)
			}
			var w struct {
				CatalogIndex uint64 `json:"catalog_index"`
			}
			if err := json.Unmarshal(a.body, &w); err != nil {
				t.Fatalf("%s %s: %v", method, path, err)
			}
			index = w.CatalogIndex
			return nil
		})
		return index
	}
	worker := func(id uint64, blockSize int) string {
		return fmt.Sprintf(`{"worker_id": %d, "model_name": "m", "endpoint": "http://w%d:8000", "block_size": %d,
			"kv_events_endpoint": "tcp://127.0.0.1:1"}`, id, id, blockSize)
	}
	write(http.MethodPost, "/workers", worker(1, 16), http.StatusCreated)
	write(http.MethodPost, "/workers", worker(2, 16), http.StatusCreated)
	write(http.MethodPost, "/workers", worker(3, 32), http.StatusCreated)
	write(http.MethodPost, "/workers", worker(4, 16), http.StatusCreated)
	write(http.MethodDelete, "/workers/1", "", http.StatusOK)
	last := write(http.MethodDelete, "/workers/2", "", http.StatusOK)

	for _, node := range c.nodes {
		checkTakeoverRefused(t, c, node, last)
	}

	// Restart a follower from a snapshot that holds the deletes: it
	// derives the partition's block size from the snapshot, not from a
	// replay of the registrations.
	var victim *procNode
	for _, node := range c.nodes {
		if node != leader {
			victim = node
			break
		}
	}
	c.eventually(victim.id+" has a snapshot at index "+fmt.Sprint(last), 30*time.Second, func() error {
		at, err := newestSnapshot(filepath.Join(filepath.Dir(victim.logPath), victim.id))
		if err != nil {
			return err
		}
		if at < last {
			return fmt.Errorf("newest snapshot at index %d, want %d", at, last)
		}
		return nil
	})
	c.kill(victim)
	c.start(victim)
	checkTakeoverRefused(t, c, victim, last)
	raw, err := os.ReadFile(victim.logPath)
	if err != nil {
		t.Fatal(err)
	}
	restart := raw[strings.LastIndex(string(raw), "=== test "):] // the start line childproc writes
	if strings.Contains(string(restart), "partition block size changed") {
		t.Fatalf("%s changed a block size after its restart:\n%s", victim.id, restart)
	}
	c.terminateAll(15 * time.Second)
}

// checkTakeoverRefused waits until node has applied index, then checks
// that worker 3 (block size 32) is incomplete, worker 4 schedulable, and
// that /select on node only ever answers worker 4.
func checkTakeoverRefused(t *testing.T, c *procCluster, node *procNode, index uint64) {
	t.Helper()
	c.eventually(node.id+" keeps partition m at block size 16", 30*time.Second, func() error {
		var records []struct {
			WorkerID  uint64   `json:"worker_id"`
			Lifecycle string   `json:"lifecycle"`
			Reasons   []string `json:"not_schedulable_reasons"`
		}
		if err := getJSON(node, api.PathWorkers, &records); err != nil {
			return err
		}
		var got []string
		for _, r := range records {
			got = append(got, fmt.Sprintf("%d:%s:%s", r.WorkerID, r.Lifecycle, strings.Join(r.Reasons, ";")))
		}
		want := []string{
			"3:incomplete:block_size mismatch for model/tenant: existing=16 requested=32",
			"4:schedulable:",
		}
		if !slices.Equal(got, want) {
			return fmt.Errorf("workers %q, want %q", got, want)
		}
		return nil
	})
	for i := range 20 {
		body := fmt.Sprintf(`{"model_name": "m", "token_ids": [%d,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17], "min_catalog_index": %d}`, i, index)
		a, err := send(context.Background(), node.pollClient(), http.MethodPost, node.url(api.PathSelect), body)
		if err != nil {
			t.Fatalf("select on %s: %v", node.id, err)
		}
		var sel struct {
			WorkerID  uint64 `json:"worker_id"`
			BlockSize uint32 `json:"block_size"`
		}
		if a.status != http.StatusOK || json.Unmarshal(a.body, &sel) != nil || sel.WorkerID != 4 || sel.BlockSize != 16 {
			t.Fatalf("select on %s = %v, want worker 4 with block size 16", node.id, a)
		}
	}
}

// newestSnapshot returns the index of the newest snapshot in a node's
// data directory (0 when there is none).
func newestSnapshot(dataDir string) (uint64, error) {
	snaps, err := raft.NewFileSnapshotStore(dataDir, 5, os.Stderr)
	if err != nil {
		return 0, err
	}
	metas, err := snaps.List()
	if err != nil || len(metas) == 0 {
		return 0, err
	}
	return metas[0].Index, nil
}
