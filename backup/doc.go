// Package backup saves a cluster's state to a directory (one dump per data
// shard, the range table, and a manifest with SHA-256 checksums) and turns
// such a directory into a restore plan for a new cluster.
package backup
