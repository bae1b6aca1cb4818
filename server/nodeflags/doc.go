// Package nodeflags is kvselect's command line, written once: the flags
// of a node with their environment variables (KVSELECT_<FLAG>, then
// Dynamo's DYN_* names for the scheduling settings), how they turn into a
// server.Config, and the usage plumbing every kvselect command shares
// (help on stdout, one-line usage errors with the nearest flags, exit
// status 2).
//
// cmd/kvselect parses its arguments with Parse. Test harnesses that start
// kvselect processes build their command lines and run them through Check
// first, so a flag that does not exist or a value kvselect would refuse
// fails in the harness, in kvselect's own words, and not as a process
// that exits at start.
//
// The flags for test harnesses (--peer-dial, --kv-dial; TestOnly) are
// parsed like the others but listed only by --help-all.
package nodeflags
