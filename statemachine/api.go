package statemachine

import (
	"github.com/wardenlock/warden/hierarchy"
	"github.com/wardenlock/warden/wire"
)

// This file is the contract between the state machine and the shard layer:
// configuration, the observer hook, and the read-only queries Lookup accepts
// besides *wire.Request reads. Change it only together with shard/.

// Config holds the limits one shard's state machine enforces. Every replica
// of a shard must use the same Config (they decide identically).
type Config struct {
	ShardID      uint64
	Paths        hierarchy.Limits // path length and depth
	MinTTL       int64            // ms, default 1000
	MaxTTL       int64            // ms, default 600000
	MaxValue     int              // bytes, default 4096
	SplitDepth   int              // namespace depth ranges are cut at, default 2
	MaxWaiters   int              // per lock path, default 10000
	MaxLeaseLock int              // locks+waiters per lease, default 100000
	// ClientIdleMs is how long (in leader-stamped time) a client's dedup
	// records are kept after its last request, default 10 minutes.
	ClientIdleMs int64
	// TombstoneMs is how long an ended lease id stays refused, default 1 hour.
	TombstoneMs int64
	// LockDelay is the default lock-delay in ms: how long a path stays
	// ungrantable after its holder's lease expired or it was revoked. An
	// acquire can set its own (Request.LockDelay). Default 0: off.
	LockDelay int64
	// Quotas per identity on this shard (auth on: requests that carry an
	// Identity; quotas.go). Decided when an entry is applied, so every
	// replica of a shard must have the same values, like LockDelay.
	MaxOwnerLeases  int // session leases + single-lock leases (held or queued), default 10000
	MaxOwnerLocks   int // holds + queued acquires and campaigns, default 100000
	MaxOwnerWaiters int // queued acquires and campaigns, default 10000
}

// SingleLeaseBit marks lease ids the state machine made for a single-lock
// acquire (Request.Lease == 0): such a lease holds exactly one lock, is
// renewed with OpRenew, and ends with that lock. Session lease ids chosen by
// clients never have this bit set.
const SingleLeaseBit uint64 = 1 << 63

// Observer receives, on every replica, the events each applied entry
// produced. Applied is called from inside Update: it must not block and must
// not keep the slice (copy what it needs).
type Observer interface {
	Applied(index uint64, events []wire.Event)
}

// LeasesQuery (Lookup) returns []LeaseInfo for every live lease, sorted by ID:
// what a replica that just became leader needs to start its lessor.
type LeasesQuery struct{}

// LeaseInfo is one live lease.
type LeaseInfo struct {
	ID  uint64
	TTL int64  // ms
	Rev uint64 // revision of the lease's creation or last renewal
	// Checkpoint is the remaining time (ms) the last leader recorded for a
	// lease nobody kept alive, or -1 when there is none (see checkpoint.go).
	Checkpoint int64
}

// LeaseCheck (Lookup) returns []LeaseState, one per ID, in order.
// Identities, when not nil, holds the identity asking for each ID (a
// keepalive); a live lease bound to another identity is LeaseForeign.
type LeaseCheck struct {
	IDs        []uint64
	Identities []string
}

// LeaseState says what the shard knows of a lease id.
type LeaseState uint8

const (
	LeaseUnknown LeaseState = 0 // never seen here (or tombstone expired)
	LeaseAlive   LeaseState = 1
	LeaseGone    LeaseState = 2 // expired or revoked: the id is refused
	// LeaseCheckpointed: alive, with a checkpoint the lessor must clear
	// through the log before it acknowledges a keepalive for it.
	LeaseCheckpointed LeaseState = 3
	LeaseForeign      LeaseState = 4 // alive, but bound to another identity
)

// StatsQuery (Lookup) returns Stats.
type StatsQuery struct{}

// Stats summarises a shard's state.
type Stats struct {
	Locks    int    // held lock grants (a reentrant hold counts once)
	Waiters  int    // queued requests
	Leases   int    // live leases
	KVs      int    // keys
	Rev      uint64 // last event revision
	Fence    uint64 // last fencing token issued (or the floor, if higher)
	Applied  uint64 // last applied entry index
	Ranges   []wire.Range
	Clients  int   // clients with dedup records
	LastTime int64 // leader-stamped time of the last entry (unix ms)
}

// RangeLoadQuery (Lookup) returns RangeLoad.
type RangeLoadQuery struct{}

// RangeLoad counts the ops applied per owned range since this replica
// started (Ops is parallel to Ranges). Load figures, not replicated state.
type RangeLoad struct {
	Ranges []wire.Range
	Ops    []uint64
}
