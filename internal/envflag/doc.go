// Package envflag backs command-line flags with environment variables, the
// way every kvselect binary reads its configuration: --raft-addr is also
// KVSELECT_RAFT_ADDR, --cache-blocks is also KVSIM_CACHE_BLOCKS.
package envflag
