//go:build race

package indexer

// raceEnabled: under the race detector some values escape that do not
// otherwise (Match allocates once or twice), so allocation counts are
// pinned only without it.
const raceEnabled = true
