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
// A node is 128 bytes with this layout; keep it that way (memory budget).
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
type holder struct {
	node     *lockNode
	owner    string
	lease    uint64
	token    uint64
	count    uint32 // reentrant holds
	leaseIdx uint32 // position in the session lease's holder list
	mode     wire.Mode
	campaign bool // an election's leader: its end is a leadership change
}

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
}

// single is a single-lock lease: it lives and dies with its one holder.
type single struct {
	h   *holder
	ttl int64
	rev uint64
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
	trie     *hierarchy.Trie[slot]
	leases   map[uint64]*lease
	singles  map[uint64]single
	tombs    map[uint64]int64
	tombList []tomb // in end order, which is time order
	tombHead int
	clients  map[uint64]*client
	lru      clientList // by last use, oldest first
	ranges   []wire.Range
	rangeGen uint64
	ownsAll  bool // ranges is the one range ["", "")
	fence    uint64
	floor    uint64
	rev      uint64
	now      int64
	applied  uint64
	nLocks   int
	nWaiters int
	nKVs     int
}

func newState() state {
	return state{
		trie:    hierarchy.New[slot](),
		leases:  map[uint64]*lease{},
		singles: map[uint64]single{},
		tombs:   map[uint64]int64{},
		clients: map[uint64]*client{},
	}
}

func slotInUse(n *lockNode) bool { return n.Val.first.token != 0 || n.Val.ext != nil }

func (n *slot) extension() *nodeExt {
	if n.ext == nil {
		n.ext = &nodeExt{}
	}
	return n.ext
}
