package wire

import "fmt"

// Op names one operation. Values are part of the protocol: append only.
type Op uint8

// Client operations.
const (
	OpInvalid   Op = 0
	OpHello     Op = 1  // handshake: Version, Token (credentials)
	OpAcquire   Op = 2  // Path, Mode, Lease, TTL, Wait, Owner
	OpRelease   Op = 3  // Path, Token (and Lease, Owner)
	OpRenew     Op = 4  // Path, Token, TTL: set the TTL of a single-lock lease
	OpKeepAlive Op = 5  // Lease (or Leases): refresh session leases; never written to the log
	OpRevoke    Op = 6  // Lease: end a lease, releasing everything it holds
	OpCancel    Op = 7  // Client, Seq of a queued acquire: withdraw the waiter
	OpLockInfo  Op = 8  // Path: holders, mode, token, waiters
	OpListLocks Op = 9  // Path as prefix: held locks under it
	OpKVGet     Op = 10 // Path
	OpKVPut     Op = 11 // Path, Value, Lease (0 = persistent), ExpectVersion (CAS when HasExpect)
	OpKVDelete  Op = 12 // Path, ExpectVersion (when HasExpect)
	OpKVList    Op = 13 // Path as prefix, Limit
	OpCampaign  Op = 14 // Path (election), Lease, Value (candidate), Wait
	OpProclaim  Op = 15 // Path, Token (leadership token), Value
	OpResign    Op = 16 // Path, Token
	OpLeader    Op = 17 // Path: current leader value and token
	OpWatch     Op = 18 // Path, Prefix flag, Rev (start revision); answers arrive as pushed events
	OpUnwatch   Op = 19 // Stream
	OpStatus    Op = 20 // cluster status (nodes, shards, leaders)
	OpRanges    Op = 21 // the range table
	OpSession   Op = 22 // create a session: TTL; answers Lease

	// Semaphores, multi-locks, revocation, lock-delay, priorities, hand-over.
	OpAcquireMulti Op = 23 // Paths (all in one shard), Mode, Lease, Owner: all or nothing, try only; answers Holders
	OpRevokeLock   Op = 24 // Path, Token (0: every holder), Grace; FlagForce for an admin revocation
	OpHandOver     Op = 25 // Path (election), Token (the leader's), Target (successor's owner): leadership moves in one command

	// Range administration (placement-ranges): answered by the meta group.
	OpRangeSplit Op = 40 // Path (a namespace) or Value (an 8-byte route key): split the range holding it there
	OpRangeMerge Op = 41 // Value: start key of a range; merges it with the next range (same shard)
	OpRangeMove  Op = 42 // Value: start key of a range, Shard: target shard; starts a move
	OpRangeList  Op = 43 // ranges with their shard, generation, load and any move in flight (Response.Value, msgpack)

	// Machines (admin): Value carries a JSON argument, answers carry JSON
	// in Value. See docs/protocol.md.
	OpNodeJoin    Op = 45 // Value {node}: register a joining node; answers {"meta_rid"}
	OpNodeAdmin   Op = 46 // Value {"action": "activate"|"drain"|"remove", "node"}
	OpShards      Op = 47 // per shard: replicas, roles, applied index, leader, move under way
	OpReplicaMove Op = 48 // Value {"shard", "from", "to"} or {"shard", "abort": true}
	// OpShardTransfer (admin): Value {"shard", "node"}: hand the shard's
	// Raft leadership to its replica on node (placement range 49–52).
	OpShardTransfer Op = 49
	// Data shards at runtime (admin): OpShardAdd Value {"nodes", "no_fill"}
	// answers {"shard", "nodes"} once the creation is recorded;
	// OpShardRetire Value {"shard"} answers {"shard"} once the retirement
	// is recorded. OpShardLog (read) answers the lifecycle decisions and
	// the policy's last reading.
	OpShardAdd    Op = 50
	OpShardRetire Op = 51
	OpShardLog    Op = 52

	// OpHolds opens the connection's hold-notice stream (holder range
	// 90–99): the answer's Stream is the request's ID, and the server
	// then pushes, on that stream, the events that end holds of the
	// session leases this connection keeps alive (Event.TellsHolder). A
	// lease joins the stream when a keepalive sent on the connection
	// after it opened is acknowledged for it.
	OpHolds Op = 90
)

// Internal operations: proposed by the shard layer itself, refused when they
// arrive from a client connection.
const (
	OpExpire     Op = 100 // Lease: the leader's lessor saw the deadline pass
	OpRaiseFence Op = 101 // Token: raise the shard's fence floor to at least Token
	OpSetRanges  Op = 102 // Ranges: the ranges this shard owns (and their generation)
	OpNoop       Op = 103 // carries only the leader's clock (keeps stamped time moving)
	OpDeadlines  Op = 110 // the leader saw a revocation deadline or a lock-delay end pass: apply what is due at the stamped time

	// OpCheckpoint (faults range 135–139): Leases, Remaining, Term. The
	// lessor records how much time each listed lease has left (ms), or
	// clears the record (a negative value), so that a new leader does not
	// give a lease that nobody keeps alive another full TTL.
	OpCheckpoint Op = 135

	// Range moves (see statemachine/move.go). Ranges[0] names the range,
	// Gen the move id.
	OpFreezeRange   Op = 120 // source: refuse (RangeMoving) every op touching the range
	OpInstallRange  Op = 121 // destination: Value is one chunk of the range's exported state; FlagMoveFinal: take ownership
	OpDropRange     Op = 122 // source after the switch (or destination on rollback): forget the range and its state
	OpUnfreezeRange Op = 123 // source on rollback: serve the range again
	// OpExportRange reads chunk Chunk of the frozen range's exported state
	// (linearizable read, never proposed): Value is the chunk, Count the
	// number of chunks. A driver without a replica of the source asks a
	// node that has one.
	OpExportRange Op = 124
	// OpLeaderTransfer asks shard Shard's Raft group, through a replica on
	// the receiving node, to hand its leadership to replica ToReplica. The
	// node deciding the transfer (the leader balancer on the meta leader,
	// or the node an operator's shard.transfer reached) sends it over a
	// peer connection when it holds no replica of the shard itself.
	OpLeaderTransfer Op = 125
)

// PeerInternal reports whether an internal op may arrive over an
// authenticated forwarding (peer) connection: the range-move steps, which
// the node driving a move sends to shards it holds no replica of, and leader
// transfers, which the node deciding one sends the same way. Client
// connections never carry internal ops.
func (op Op) PeerInternal() bool {
	switch op {
	case OpFreezeRange, OpInstallRange, OpDropRange, OpUnfreezeRange, OpSetRanges, OpExportRange,
		OpLeaderTransfer:
		return true
	}
	return false
}

// Internal reports whether op may only be proposed by the server itself.
func (op Op) Internal() bool { return op >= OpExpire }

// Mutating reports whether op changes replicated state and so is proposed to
// Raft (as opposed to being answered by a linearizable read or by the lessor).
func (op Op) Mutating() bool {
	switch op {
	case OpAcquire, OpRelease, OpRenew, OpRevoke, OpCancel, OpKVPut, OpKVDelete,
		OpCampaign, OpProclaim, OpResign, OpSession,
		OpAcquireMulti, OpRevokeLock, OpHandOver, OpDeadlines,
		OpExpire, OpRaiseFence, OpSetRanges, OpNoop, OpCheckpoint,
		OpFreezeRange, OpInstallRange, OpDropRange, OpUnfreezeRange:
		return true
	}
	return false
}

var opNames = map[Op]string{
	OpHello: "hello", OpAcquire: "acquire", OpRelease: "release", OpRenew: "renew",
	OpKeepAlive: "keepalive", OpRevoke: "revoke", OpCancel: "cancel", OpLockInfo: "lockinfo",
	OpListLocks: "listlocks", OpKVGet: "kv.get", OpKVPut: "kv.put", OpKVDelete: "kv.delete",
	OpKVList: "kv.list", OpCampaign: "campaign", OpProclaim: "proclaim", OpResign: "resign",
	OpLeader: "leader", OpWatch: "watch", OpUnwatch: "unwatch", OpStatus: "status",
	OpRanges: "ranges", OpSession: "session", OpExpire: "expire", OpRaiseFence: "raisefence",
	OpSetRanges: "setranges", OpNoop: "noop", OpCheckpoint: "checkpoint",
	OpAcquireMulti: "acquire.multi", OpRevokeLock: "revokelock", OpHandOver: "handover", OpDeadlines: "deadlines",
	OpRangeSplit: "range.split", OpRangeMerge: "range.merge", OpRangeMove: "range.move", OpRangeList: "range.list",
	OpFreezeRange: "range.freeze", OpInstallRange: "range.install", OpDropRange: "range.drop", OpUnfreezeRange: "range.unfreeze",
	OpExportRange: "range.export", OpLeaderTransfer: "leader.transfer", OpShardTransfer: "shard.transfer",
	OpHolds: "holds", OpNodeJoin: "node.join", OpNodeAdmin: "node.admin", OpShards: "shards", OpReplicaMove: "replica.move",
	OpShardAdd: "shard.add", OpShardRetire: "shard.retire", OpShardLog: "shard.log",
}

func (op Op) String() string {
	if s, ok := opNames[op]; ok {
		return s
	}
	return fmt.Sprintf("op(%d)", uint8(op))
}

// Mode is a lock mode.
type Mode uint8

const (
	Exclusive Mode = 0
	Shared    Mode = 1
)

func (m Mode) String() string {
	if m == Shared {
		return "shared"
	}
	return "exclusive"
}
