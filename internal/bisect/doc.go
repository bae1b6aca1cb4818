// Package bisect finds where a shrinking family of nested sets changes
// along a path, probing O(k log n) depths for k changes instead of all n.
//
// Both of kvselect's prefix questions have this shape: the ranks that hold
// the first d blocks of a prompt in their cache (indexer), and the ranks
// with the first d blocks of a prompt in flight (scheduler). A rank in the
// set at depth d is in the set at every smaller depth, so a rank's longest
// prefix is the deepest depth whose set contains it, and two depths with
// sets of equal size have equal sets and nothing changes between them.
package bisect
