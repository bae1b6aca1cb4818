package jepsen

import (
	"time"
)

// The bounds of the verdict (SPEC §13: a gate, not a report). Each is a
// named constant so that the code, the docs and the self-tests agree.

// DefaultTrailingLogs is the nodes' --raft-trailing-logs (Config.
// TrailingLogs): the entries a leader keeps after a snapshot. It is low
// so that snapshot-catch-up compacts past an isolated follower within
// seconds of writes; the nemesis reads the value back from the leader's
// command line (proccluster.NodeOptions.Effective), never a copy.
const DefaultTrailingLogs = 64

// LoadExpiry is the nodes' --active-request-expiry-secs: an hour, far
// longer than any run. A booking whose free was lost is then still load
// when the loads check runs, not a booking the sweep quietly expired.
const LoadExpiry = time.Hour

// AntiEntropyPeriod is how often a node publishes its live booking set
// to its peers, which drop mirrors missing from it (SPEC §3.6).
const AntiEntropyPeriod = time.Second

// LoadsZeroBound is how long after the final heal (every fault undone,
// every client stopped, every free the harness could not confirm sent
// again) each node's load may take to reach zero: a few anti-entropy
// periods, with room for a loaded 2-core machine. A free lost by replica
// sync shows as load that stays past it.
const LoadsZeroBound = 10 * AntiEntropyPeriod

// DefaultSelectionGap is the longest stretch a node the nemesis did not
// take down may go without a successful selection (MaxUnavailability):
// selection needs no quorum, no leader and no peer (SPEC §1), so every
// live node must keep answering. A second allows a short burst of fast
// refusals, not one selection that timed out (OpTimeout).
const DefaultSelectionGap = time.Second

// selectionGaps states the bound per nemesis. Every one is
// DefaultSelectionGap today, each for its reason; a nemesis missing here
// has no bound and fails (SelectionGapBound).
var selectionGaps = map[string]time.Duration{
	// The killed, paused or restarted node is down on purpose and left
	// out (NemesisEvent.Down); the others select from their own catalog
	// and index, leader or not.
	"kill-leader":  DefaultSelectionGap,
	"kill-random":  DefaultSelectionGap,
	"pause-leader": DefaultSelectionGap,
	"restart-all":  DefaultSelectionGap, // every node down until the heal; all must select after it
	// A node cut off from the others keeps selecting with its last
	// catalog; links between nodes never carry a selection.
	"partition-isolate-leader": DefaultSelectionGap,
	"partition-halves":         DefaultSelectionGap,
	"partition-bridge":         DefaultSelectionGap,
	"partition-one-way":        DefaultSelectionGap,
	"latency":                  DefaultSelectionGap,
	"flaky":                    DefaultSelectionGap,
	"snapshot-catch-up":        DefaultSelectionGap, // installing a snapshot swaps the catalog, never blocks selection
	"leader-transfer":          DefaultSelectionGap,
	// A node cut off from its workers keeps selecting: a listener is
	// judged stale only after --stale-listener-after (30 s), longer than
	// a fault.
	"worker-link-cut": DefaultSelectionGap,
	// The removed node exits and is down until it is back as a voter;
	// the other two keep selecting.
	"member-remove-rejoin": DefaultSelectionGap,
	// The follower is down on purpose until its heal, which waits for
	// its index recovery; the other two keep selecting.
	"restart-after-60s": DefaultSelectionGap,
}

// SelectionGapBound is the bound of MaxUnavailability for a nemesis; 0
// for a nemesis without a stated bound (the verdict then fails).
func SelectionGapBound(nemesis string) time.Duration { return selectionGaps[nemesis] }

// MaxLiveSelectFailRatio bounds the selections that fail on nodes the
// nemesis did not take down, as a share of all answered selections: the
// gap bound limits how long a node fails, this how often.
const MaxLiveSelectFailRatio = 0.01

// Minimum work: a run that did (almost) nothing proves nothing and fails.
const (
	// MinCatalogOpsPerSecond: acknowledged worker catalog ops per second
	// of the run (a healthy 2-core run does hundreds).
	MinCatalogOpsPerSecond = 2
	// MinSelectsPerNode: successful selections on every node.
	MinSelectsPerNode = 20
	// MinThresholdWrites: acknowledged busy-threshold writes.
	MinThresholdWrites = 2
	// MinBusyProbes: load-shedding probes judged (a tight threshold
	// applied, every rank held, one more selection answered busy).
	MinBusyProbes = 1
	// MinLeaseRenewals: acknowledged keepalives.
	MinLeaseRenewals = 5
	// MinLeaseLapses: leases seen to lapse while the run went on.
	MinLeaseLapses = 1
	// MinMemberChanges: a follower removed and back as a voter.
	MinMemberChanges = 1
)

// Leases of the workload (leases.go).
const (
	// LeaseTTL is the lease_ttl_s of the lease clients' workers.
	LeaseTTL = 2 * time.Second
	// LeaseRenewEvery is how often a lease client renews: several times
	// per TTL, on random nodes, so one lost keepalive never lapses it.
	LeaseRenewEvery = 400 * time.Millisecond
	// LeaseLapseBound is how long past its TTL a lease left alone may
	// take to be gone from every node once the cluster is healed: the
	// leader's 100 ms tick, one Raft write, its apply everywhere.
	LeaseLapseBound = 5 * time.Second
)

// Busy thresholds of the workload (thresholds.go).
const (
	// TightDecodeThreshold is the active_decode_blocks_threshold that
	// trips: a rank holding one selection prompt (8 blocks of 16 tokens)
	// of SimTotalKVBlocks is over it.
	TightDecodeThreshold = 0.1
	// LooseDecodeThreshold never trips in the workload: a rank would need
	// every one of its SimTotalKVBlocks active.
	LooseDecodeThreshold = 1.0
	// ThresholdLagBound is how long after a threshold write stops being
	// the one in force (and after every fault overlapping its time has
	// healed) a node may still shed with it: its apply, plus the holds'
	// frees reaching it by replica sync.
	ThresholdLagBound = 5 * time.Second
)
