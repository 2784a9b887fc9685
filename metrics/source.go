package metrics

import (
	"time"

	"github.com/wardenlock/warden/feed"
	"github.com/wardenlock/warden/router"
)

// What the metrics observe, as small interfaces this package owns; the node
// wires its parts in (node/metrics.go).

// Node is a node's replicas.
type Node interface {
	// ShardIDs are the data shards the node has a replica of.
	ShardIDs() []uint64
	// Replica is the node's replica of a data shard.
	Replica(shardID uint64) (Replica, bool)
	// Raft is the Raft view of every replica of the node, the meta
	// group's included.
	Raft() []RaftInfo
	// Stats counts the replicated state of a data shard's local replica
	// (a stale read: no Raft round).
	Stats(shardID uint64) (Stats, bool)
	// RangeMoves counts the range moves this node's driver finished.
	RangeMoves() uint64
	// WAL is the node's Raft log store (nil: none to report).
	WAL() WAL
	// OnReplicasChanged calls fn (nil: no one) whenever the node starts or
	// stops a replica (shards are created and retired, replicas move).
	OnReplicasChanged(fn func())
}

// RaftInfo is one replica's Raft view.
type RaftInfo struct {
	Shard, Replica, Leader, Term uint64 // Leader 0: none known
	Logged                       uint64 // the last index in its log
	HasLog                       bool   // Logged was read
}

// Stats counts a data shard's replicated state.
type Stats struct {
	Applied                     uint64
	Locks, Waiters, Leases, KVs int
	Fence                       uint64
}

// Replica is one local replica of a data shard.
type Replica interface {
	IsLeader() bool
	// Watchers counts clients' watches.
	Watchers() int
	ProposalStats() (queued int, pending int64, failed uint64)
	// Snapshots is the snapshots the replica saved and recovered from since
	// the process started.
	Snapshots() (saved, recovered uint64)
	Watch(path string, prefix bool, rev uint64, sub feed.Subscriber) (id, start uint64, err error)
	Unwatch(id uint64)
	// SetApplyObserver hears how long each entry took from proposal to
	// local apply (nil: no one).
	SetApplyObserver(func(time.Duration))
}

// WAL is the Raft log store's sync and rotation counters.
type WAL interface {
	// Syncs: how many, their total seconds, and per bound (seconds) how
	// many took at most that.
	Syncs() (count uint64, seconds float64, bounds []float64, cumulative []uint64)
	// Rotations: the same for segment rotations, and the live entry bytes
	// and replicas copied forward at them.
	Rotations() (count uint64, seconds float64, bounds []float64, cumulative []uint64, copiedBytes, copiedReplicas uint64)
}

// Router is the node's router.
type Router interface {
	SetHooks(*router.Hooks)
	// Forwarded counts requests sent on to another node.
	Forwarded() uint64
}

// Audit is the node's audit store's counters.
type Audit interface {
	Written() uint64
	Dropped() uint64
	Values() (values, entries uint64)
	DurableFlushes() (forced, covered uint64)
}
