package router

import (
	"context"

	"github.com/wardenlock/warden/feed"
	"github.com/wardenlock/warden/internal/cpuload"
	"github.com/wardenlock/warden/placement"
	"github.com/wardenlock/warden/wire"
)

// Host is what the router needs of the node it runs in: its replicas, the
// range table, and the control plane's operations. The node wires its
// shard host in (node.go); a standalone router has none. The router
// therefore links no Raft engine.
type Host interface {
	NodeID() uint64
	// Replica is the node's replica of a shard, if it has one.
	Replica(shardID uint64) (Replica, bool)
	ShardIDs() []uint64
	// Leader is the node that leads shardID as far as this node knows (0:
	// none known); NoteLeader tells it a leader learnt elsewhere.
	Leader(shardID uint64) uint64
	NoteLeader(shardID, node uint64)
	Table() *placement.Table
	RefreshTable(ctx context.Context) (*placement.Table, error)
	// Joined says whether the node runs its replica of the meta group.
	Joined() bool
	// SetForwarder lets the control plane reach shards with no local
	// replica through the router.
	SetForwarder(func(shardID uint64, req *wire.Request, done func(*wire.Response)))

	AdmitNode(ctx context.Context, n placement.Node) (uint64, error)
	SetNodeState(ctx context.Context, id uint64, state string) error
	RemoveNode(ctx context.Context, id uint64) error
	MoveReplica(ctx context.Context, shard, from, to uint64) (uint64, error)
	AbortMove(ctx context.Context, shard uint64) error
	TransferLeadership(ctx context.Context, shardID, node uint64) error
	RangeCommand(ctx context.Context, c placement.RangeCommand) (uint64, error)
	// CreateShard and RetireShard record a data shard's creation (on
	// nodes; none: the control plane chooses) and retirement; reason goes
	// into the recorded decision.
	CreateShard(ctx context.Context, nodes []uint64, fill bool, reason string) (uint64, error)
	RetireShard(ctx context.Context, id uint64, reason string) error
	// ShardPolicyState is the automatic shard policy's last reading on
	// this node (a JSON object; nil when it never ran here).
	ShardPolicyState() any

	// RangeLoad is the operation count per range that the local replica
	// of shardID has applied (ranges[i] served ops[i]).
	RangeLoad(shardID uint64) (ranges []wire.Range, ops []uint64, err error)
	// ErrorAnswer turns an error of the operations above into an answer.
	ErrorAnswer(err error) *wire.Response
	// RaftPasses counts this process's Raft passes and what they carried,
	// for the status (a JSON object).
	RaftPasses() any
	// CPU is this process's CPU use against its capacity; false when the
	// node does not measure it (several nodes in one process).
	CPU() (cpuload.Reading, bool)
}

// Replica is one local replica of a shard.
type Replica interface {
	// SubmitTo proposes (or reads) req and answers it through to, once.
	SubmitTo(req *wire.Request, to wire.Answerer)
	IsLeader() bool
	AppliedIndex() uint64
	// Watch subscribes sub to the events of path (or of every path under
	// it, with prefix) from revision rev (0: from now); it returns the
	// subscription's id and the revision the watch starts after.
	Watch(path string, prefix bool, rev uint64, sub feed.Subscriber) (id, start uint64, err error)
	Unwatch(id uint64)
	Watchers() int
	// Batches is the Raft entries this replica proposed and the operations
	// in them.
	Batches() (entries, ops uint64)
	// Snapshots is the snapshots this replica saved, and those it recovered
	// its state from (its own at a restart, or the leader's when it fell
	// behind the compacted log), since the process started.
	Snapshots() (saved, recovered uint64)
}
