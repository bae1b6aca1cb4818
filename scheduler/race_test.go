//go:build race

package scheduler

// raceEnabled: the race detector instruments allocations of its own.
const raceEnabled = true
