// Package shard runs the replicas of one node: the dragonboat NodeHost, and
// per data shard the batching proposer, linearizable reads, the leader-only
// lessor that turns lease deadlines into Expire proposals, parked blocking
// requests, and the event feed that watches read from.
package shard
