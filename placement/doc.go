// Package placement keeps the range table (key range → shard, generation)
// and the node registry in the meta Raft group, and answers where a key lives.
package placement
