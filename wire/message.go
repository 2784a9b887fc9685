package wire

// Protocol version sent in the handshake.
const ProtocolVersion = 1

// Request flags.
const (
	FlagPrefix    uint32 = 1 << 0 // Path is a prefix (watch, list)
	FlagHasExpect uint32 = 1 << 1 // Version is an expected version (compare-and-set; 0 = must not exist)
	FlagStale     uint32 = 1 << 2 // a follower (possibly stale) read is acceptable
	FlagPrevKV    uint32 = 1 << 3 // watch events carry the previous value
	FlagSigned    uint32 = 1 << 4 // reserved: ask for a signed fencing token
	FlagPeer      uint32 = 1 << 5 // Hello: the connection is a node's forwarding connection

	FlagRevocable uint32 = 1 << 8  // Acquire/Campaign: waiters (not only admins) may ask for this lock's revocation
	FlagForce     uint32 = 1 << 9  // RevokeLock: an admin revocation (needs the admin permission on the path)
	FlagMoveFinal uint32 = 1 << 12 // InstallRange: the last chunk; the destination takes ownership
	// FlagHoldNotices (holder range: bits 20-23), on a watch forwarded over
	// a peer connection: push only the events that tell a holder its hold
	// ended (Event.TellsHolder), for a router with no replica of the shard.
	// Ignored from clients.
	FlagHoldNotices uint32 = 1 << 20
)

// LockDelayNone in Request.LockDelay turns lock-delay off for one lock
// (0 means "the shard's default").
const LockDelayNone int64 = -1

// Wait values for Acquire and Campaign.
const (
	WaitNone    int64 = 0  // try once: Conflict if not grantable now
	WaitForever int64 = -1 // queue until granted, cancelled or the lease ends
)

// Request is one client operation. Which fields matter depends on Op; unused
// fields are zero and cost nothing on the wire. Times are milliseconds.
type Request struct {
	ID      uint64 // per-connection request id, echoed in the response
	Op      Op
	Mode    Mode
	Path    string
	Lease   uint64 // session lease (0: Acquire makes a single-lock lease)
	TTL     int64  // lease TTL in ms
	Wait    int64  // ms to wait for a grant; WaitNone / WaitForever
	Token   uint64 // fencing token (release, renew, proclaim, resign)
	Owner   string // owner within the lease; same lease+owner = reentrant
	Value   []byte
	Version uint64 // expected version (with FlagHasExpect)
	Rev     uint64 // watch start revision
	Client  uint64 // client id for exactly-once (with Seq)
	Seq     uint64 // client request sequence number for exactly-once
	AckSeq  uint64 // every Seq below this has been answered (dedup window floor)
	Gen     uint64 // range generation the router routed with
	Flags   uint32
	Limit   uint32
	Stream  uint64 // watch stream to cancel (Unwatch)
	Auth    string // credentials (Hello)
	Leases  []uint64
	Ranges  []Range
	Shard   uint64 // target shard chosen by the router (informational)
	Term    uint64 // internal: the proposing leader's Raft term (Noop marker, Expire, Checkpoint)
	// Remaining (internal, Checkpoint): ms left on Leases[i], or -1 to clear
	// its checkpoint.
	Remaining []int64
	// ToReplica (internal, LeaderTransfer): the replica id that is to lead
	// the shard.
	ToReplica uint64
	// Identity is set by the router, never trusted from a client: the
	// authenticated identity of the connection that sent a lease-bearing
	// request, so the state machine can bind leases to their creator.
	// Forwarding (peer) connections carry it from the first router.
	Identity string
	// LeaseKey proves the right to create the session lease Lease on a
	// shard: Lease must equal LeaseID(LeaseKey). Only the session's client
	// knows it (it never appears in answers or events), so with auth on an
	// identity that learns a lease id cannot open it first on a shard its
	// owner has not used yet.
	LeaseKey uint64

	Paths   []string // AcquireMulti: the paths, all served by one shard
	Grace   int64    // RevokeLock: ms the holder has to release before it is revoked (0: now)
	Target  string   // HandOver: the owner of the queued candidate that becomes leader
	Permits uint32   // Acquire: N > 0 makes the path a counting semaphore of N permits
	// Chunk (internal, ExportRange): which chunk of the export.
	Chunk     uint32
	LockDelay int64 // Acquire/Campaign: ms the path stays ungrantable after a non-graceful end (0: default, -1: none)
	Priority  int64 // Campaign: higher-priority candidates win a free leadership first
	// Position (Watch): per shard, the revision the watch has seen; it
	// resumes after each, and from its first event on a shard it does not
	// name.
	Position []ShardRev

	// Trace is the W3C trace context of the calling span, "traceparent" or
	// "traceparent;tracestate", set only when tracing is on.
	Trace string
}

// Has reports whether flag f is set.
func (r *Request) Has(f uint32) bool { return r.Flags&f != 0 }

// Response answers one request, or carries pushed events (Stream != 0).
type Response struct {
	ID      uint64
	Code    Code
	Msg     string
	Token   uint64
	Lease   uint64
	TTL     int64
	Rev     uint64
	Value   []byte
	Version uint64
	Mode    Mode
	Count   uint32 // hold count (reentrancy) or number of entries
	Owner   string
	Path    string
	Stream  uint64 // non-zero: a pushed frame on this stream
	Hint    *Hint
	Holders []Holder
	Waiters []Waiter
	KVs     []KV
	Events  []Event
	Leases  []uint64 // keepalive: leases that are gone
	Ranges  []Range
	Grants  []Grant      // state machine result: waiters this operation granted
	Table   *RouteTable  // OpRanges: ranges and shard leaders
	Signed  *SignedGrant // a grant's signature, when asked for with FlagSigned
	Denied  []uint64     // keepalive: leases bound to another identity (not refreshed)

	DelayUntil int64  // LockInfo: stamped unix ms until which the path is in lock-delay (0: none)
	RevokeAt   int64  // LockInfo: earliest pending revocation deadline of a holder (unix ms, 0: none)
	Permits    uint32 // LockInfo: the semaphore's permit count (0: not a semaphore)
	// Position: a watch's first answer, per shard the revision it starts
	// after; a Compacted answer, the shard and its oldest retained revision.
	Position []ShardRev
}

// ShardRev is one shard's revision: an entry of a watch position.
type ShardRev struct {
	_msgpack struct{} `msgpack:",as_array"`
	Shard    uint64
	Rev      uint64
}

// Hint tells the router where a key lives now.
type Hint struct {
	Shard  uint64 `msgpack:"s"`
	Gen    uint64 `msgpack:"g"`
	Leader string `msgpack:"l,omitempty"`
}

// Holder is one holder of a lock.
type Holder struct {
	_msgpack struct{} `msgpack:",as_array"`
	Owner    string
	Lease    uint64
	Mode     Mode
	Token    uint64
	Count    uint32
	Path     string
	TTL      int64 // ms left on the holder's lease, when the answering node knows it
}

// Waiter is one queued request.
type Waiter struct {
	_msgpack struct{} `msgpack:",as_array"`
	Owner    string
	Lease    uint64
	Mode     Mode
	Client   uint64
	Seq      uint64
	Path     string
}

// Grant tells the shard layer that a queued waiter was granted, so the node
// holding the parked request can answer it.
type Grant struct {
	_msgpack struct{} `msgpack:",as_array"`
	Client   uint64
	Seq      uint64
	Path     string
	Token    uint64
	Lease    uint64
	Mode     Mode
}

// KV is one key-value entry.
type KV struct {
	_msgpack  struct{} `msgpack:",as_array"`
	Key       string
	Value     []byte
	Version   uint64
	Lease     uint64
	CreateRev uint64
	ModRev    uint64
}

// Range is an interval [Start, End) of route keys (RouteKey: the 64-bit
// hash of a namespace) owned by one shard. Start "" is the start of the key
// space, End "" its end.
type Range struct {
	_msgpack struct{} `msgpack:",as_array"`
	Start    string
	End      string
	Shard    uint64
	Gen      uint64
}

// EventKind says what happened.
type EventKind uint8

const (
	EvAcquired EventKind = 1 // a lock was granted (Cause: Direct or HandOff)
	EvReleased EventKind = 2 // a lock ended (Cause says why)
	EvQueued   EventKind = 3 // a waiter joined a queue
	EvDequeued EventKind = 4 // a waiter left without a grant (Cause: Cancelled, Expired, ...)
	EvKVPut    EventKind = 5
	EvKVDelete EventKind = 6
	EvLeader   EventKind = 7 // an election's leader changed (Value = new leader's value)
	EvLease    EventKind = 8 // a lease was created
	EvLeaseEnd EventKind = 9 // a lease ended (Cause: Expired, Revoked)
	EvFence    EventKind = 10
	EvRenewed  EventKind = 11 // a single-lock lease's TTL changed

	EvRevokeRequested EventKind = 30 // the holder (Token) is asked to release; TTL = grace ms, then it is revoked
	EvDelayStarted    EventKind = 31 // Path is in lock-delay for TTL ms (after an expiry or revocation)
	EvDelayEnded      EventKind = 32 // Path's lock-delay is over
)

// Cause says why an event happened.
type Cause uint8

const (
	CauseNone      Cause = 0
	CauseDirect    Cause = 1 // granted immediately
	CauseHandOff   Cause = 2 // granted from the queue by a release/expiry
	CauseReleased  Cause = 3 // released by the holder
	CauseExpired   Cause = 4 // the lease expired
	CauseRevoked   Cause = 5 // the lease was revoked
	CauseCancelled Cause = 6 // the waiter was withdrawn
	CauseResigned  Cause = 7
	CauseProclaim  Cause = 8
	CauseUser      Cause = 9 // kv put/delete by a client
	CauseMoved     Cause = 10
	CauseForced    Cause = 30 // revoked at its revocation deadline
	CauseHandover  Cause = 31 // leadership handed to a named successor
	CauseAdmin     Cause = 32 // an admin asked for the revocation
	CauseWaiter    Cause = 33 // a waiter asked for the revocation
)

var causeNames = [...]string{"", "direct", "handoff", "released", "expired", "revoked",
	"cancelled", "resigned", "proclaimed", "user", "moved"}

var moreCauseNames = map[Cause]string{CauseForced: "forced", CauseHandover: "handover",
	CauseAdmin: "admin", CauseWaiter: "waiter"}

func (c Cause) String() string {
	if int(c) < len(causeNames) {
		return causeNames[c]
	}
	if s, ok := moreCauseNames[c]; ok {
		return s
	}
	return "cause?"
}

var kindNames = [...]string{"", "acquired", "released", "queued", "dequeued", "put", "delete",
	"leader", "lease", "lease-end", "fence", "renewed"}

var moreKindNames = map[EventKind]string{EvRevokeRequested: "revoke-requested",
	EvDelayStarted: "delay-started", EvDelayEnded: "delay-ended"}

func (k EventKind) String() string {
	if int(k) < len(kindNames) {
		return kindNames[k]
	}
	if s, ok := moreKindNames[k]; ok {
		return s
	}
	return "event?"
}

// Event is one change in a shard, numbered by the shard's revision.
type Event struct {
	_msgpack struct{} `msgpack:",as_array"`
	Rev      uint64
	Kind     EventKind
	Cause    Cause
	Path     string
	Mode     Mode
	Token    uint64
	Lease    uint64
	Owner    string
	Value    []byte
	Version  uint64
	Client   uint64
	Seq      uint64
	Shard    uint64
	Time     int64 // leader-stamped unix ms of the command that caused it
	TTL      int64 // lease TTL in ms (EvLease, EvRenewed)
}

// TellsHolder reports whether the holder must be told of this event because
// it did not bring it about itself: a session lease ended (expired, or
// revoked), a hold was revoked at its deadline, or a release, resign or
// hand-over came from another lease or owner (an admin; EvReleased then
// carries that request's Client and Seq). The holder's own releases, the
// holds a lease takes with it when it ends (its EvLeaseEnd says so once),
// and holds that moved with their range to another shard do not. A
// single-lock lease has one hold and ends with it, so its EvReleased says
// everything (also an expiry or a revocation of the lease) and its
// EvLeaseEnd, which repeats it, does not tell.
func (e *Event) TellsHolder() bool {
	single := SingleLease(e.Lease)
	switch e.Kind {
	case EvLeaseEnd:
		return !single && e.Cause != CauseMoved
	case EvReleased:
		switch e.Cause {
		case CauseForced:
			return true
		case CauseReleased, CauseResigned, CauseHandover:
			return e.Client != 0
		case CauseExpired, CauseRevoked:
			return single // a session's holds end with its lease, whose EvLeaseEnd tells
		}
	}
	return false
}
