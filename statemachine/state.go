package statemachine

import (
	"github.com/wardenlock/warden/hierarchy"
	"github.com/wardenlock/warden/wire"
)

// lockNode is one path in the shard's trie.
type lockNode = hierarchy.Node[slot]

// slot is the payload of a trie node. The first holder lives inline because
// most held paths have exactly one; everything rarer (more shared holders, a
// queue, a KV entry, an election value) hangs off ext, which is nil otherwise.
// A node is 112 bytes with this layout (a 112-byte size class); keep it
// that way (memory budget).
type slot struct {
	first holder // valid when first.token != 0
	ext   *nodeExt
}

type nodeExt struct {
	more       []*holder // further holders, in grant order
	head, tail *waiter   // FIFO queue
	kv         *kvEntry
	leader     []byte // election value of the exclusive holder, if it campaigned or proclaimed
}

func (e *nodeExt) empty() bool {
	return len(e.more) == 0 && e.head == nil && e.kv == nil && e.leader == nil
}

// holder is one grant. Its address is stable for its whole life (inline in a
// node, or allocated on its own), so leases point at it.
//
// A single-lock lease lives inside its holder: its id is SingleLeaseBit|token
// and it has no list to sit in, so the words a session holder spends on its
// lease id and list position keep the single lease's revision and TTL
// instead. That keeps a lock with its own lease as small as one in a session.
type holder struct {
	node  *lockNode
	owner string
	// lw is the session lease's id, or a single-lock lease's revision (of
	// its creation or last renewal). Read it through leaseID / singleRev.
	lw       uint64
	token    uint64
	count    uint32 // reentrant holds
	leaseIdx uint32 // session: position in the lease's holder list; single: TTL bits 0-31
	mode     wire.Mode
	campaign bool   // an election's leader: its end is a leadership change
	single   bool   // holds a single-lock lease
	ttlHigh  uint16 // single: TTL bits 32-47
}

// maxSingleTTL bounds TTLs so a single-lock lease's fits in its 48 bits.
const maxSingleTTL = 1<<48 - 1

func (h *holder) leaseID() uint64 {
	if h.single {
		return SingleLeaseBit | h.token
	}
	return h.lw
}

func (h *holder) setSingle(ttl int64, rev uint64) {
	h.single, h.lw = true, rev
	h.leaseIdx, h.ttlHigh = uint32(ttl), uint16(ttl>>32)
}

func (h *holder) singleTTL() int64  { return int64(h.leaseIdx) | int64(h.ttlHigh)<<32 }
func (h *holder) singleRev() uint64 { return h.lw }

// waiter is one queued acquire or campaign.
type waiter struct {
	node       *lockNode
	prev, next *waiter
	owner      string
	lease      uint64 // 0: a single-lock lease is made at grant time, with ttl
	ttl        int64
	client     uint64
	seq        uint64
	arrival    uint64 // revision of its EvQueued event: the FIFO order
	value      []byte // campaign value
	leaseIdx   uint32
	mode       wire.Mode
	campaign   bool
}

// lease is a session lease: a client-chosen id holding any number of locks,
// waiters and ephemeral keys. Each list is unordered in meaning but its order
// is replicated (and snapshotted) because lease end walks it.
type lease struct {
	id      uint64
	ttl     int64
	rev     uint64
	holders []*holder
	waiters []*waiter
	keys    []*lockNode
	owner   string  // identity that created it when auth is on ("" = unbound); owners.go
	ten     *tenant // owner's quota counts (nil = unbound); quotas.go
}

type kvEntry struct {
	value     []byte
	version   uint64
	createRev uint64
	modRev    uint64
	lease     uint64
	leaseIdx  uint32
}

// tomb records when a lease id ended; it is refused until TombstoneMs later.
type tomb struct {
	id uint64
	at int64
}

// state is everything that is replicated: what a snapshot holds and what
// Recover rebuilds. Scratch space lives in StateMachine.
type state struct {
	trie    *hierarchy.Trie[slot]
	leases  map[uint64]*lease
	singles singleTable // single-lock leases, by token
	tombs   map[uint64]int64
	// checkpoints: remaining ms of leases nobody keeps alive, recorded by
	// the leader's lessor (checkpoint.go)
	checkpoints map[uint64]int64
	tombList    []tomb // in end order, which is time order
	tombHead    int
	clients     map[uint64]*client
	lru         clientList // by last use, oldest first
	ranges      []wire.Range
	rangeGen    uint64
	ownsAll     bool          // ranges is the one range ["", "")
	frozen      []frozenRange // owned ranges frozen for a move (move.go)
	fence       uint64
	floor       uint64
	rev         uint64
	now         int64
	maxTerm     uint64 // highest leader term marker applied (OpNoop{Term}): older-term expiries are refused
	applied     uint64
	nLocks      int
	nWaiters    int
	nKVs        int

	holdX  map[uint64]*holdExtra // by token (extras.go)
	waitX  map[uint64]*waitExtra // by waiter arrival
	sems   map[string]uint32     // semaphore path -> permits, while held
	delays map[string]int64      // path -> stamped ms its lock-delay ends

	singleOwn map[uint64]string // single-lock holder's token -> its creator's identity (owners.go)
	waitOwn   map[uint64]string // queued single-lock acquire's arrival -> its identity

	// tenants counts what each identity holds, for its quotas (quotas.go):
	// derived from the state above, rebuilt on recovery, not snapshotted.
	tenants    map[string]*tenant
	lastTenant *tenant
}

func newState() state {
	return state{
		trie:        hierarchy.New[slot](),
		leases:      map[uint64]*lease{},
		tombs:       map[uint64]int64{},
		clients:     map[uint64]*client{},
		checkpoints: map[uint64]int64{},
		holdX:       map[uint64]*holdExtra{},
		waitX:       map[uint64]*waitExtra{},
		sems:        map[string]uint32{},
		delays:      map[string]int64{},
		singleOwn:   map[uint64]string{},
		waitOwn:     map[uint64]string{},
		tenants:     map[string]*tenant{},
	}
}

func slotInUse(n *lockNode) bool { return n.Val.first.token != 0 || n.Val.ext != nil }

func (n *slot) extension() *nodeExt {
	if n.ext == nil {
		n.ext = &nodeExt{}
	}
	return n.ext
}
