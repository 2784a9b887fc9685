// Package audit keeps, on each node, a pebble store of every event its
// replicas apply: the audit trail (who held which lock, with which token,
// and why it ended) and the watch history that lets a watch resume from a
// revision after a restart. Writes are staged per shard and batched off
// the apply path, with no log of their own: the Raft log's replay recovers
// what a crash loses, and Durable (before each snapshot) keeps what it cannot.
// Retention is bounded by age and size.
package audit
