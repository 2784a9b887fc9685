package placement

import (
	"encoding/binary"
	"sort"
	"strings"

	"github.com/wardenlock/warden/hierarchy"
	"github.com/wardenlock/warden/wire"
)

// MetaShard is the Raft group that holds the table.
const MetaShard uint64 = 1

// Node is one member of the cluster.
type Node struct {
	ID         uint64 `msgpack:"id"`
	RaftAddr   string `msgpack:"raft"`
	ClientAddr string `msgpack:"client"`
	AdminAddr  string `msgpack:"admin,omitempty"`
	// State is "" (active: may receive replicas) or NodeDraining (replicas
	// are being moved off; it receives none). nodes.go.
	State string `msgpack:"state,omitempty"`
	// MetaReplica is the node's replica id in the meta group: 0 = its node
	// id (an initial member, a voter); a joined node gets a non-voting
	// replica with a fresh id.
	MetaReplica uint64 `msgpack:"meta_rid,omitempty"`
}

// ShardInfo names a data shard and the nodes holding its replicas (replica id
// = node id).
type ShardInfo struct {
	ID       uint64   `msgpack:"id"`
	Replicas []uint64 `msgpack:"replicas"`
	// RIDs are the Raft replica ids, aligned with Replicas; nil when every
	// replica id equals its node id (the initial layout). A replica added
	// by a move gets a fresh id, because Raft never lets a removed id back
	// in (nodes.go).
	RIDs []uint64 `msgpack:"rids,omitempty"`
	// State is where the shard stands in its lifecycle (lifecycle.go);
	// Fill asks the driver to move ranges into it once active; Reason is
	// why it was created or is retiring.
	State  ShardState `msgpack:"state,omitempty"`
	Fill   bool       `msgpack:"fill,omitempty"`
	Reason string     `msgpack:"reason,omitempty"`
	// Runtime marks a shard created while the cluster ran: a node of its
	// initial replicas that was down while it was created starts its
	// replica from the initial member list when it comes back.
	Runtime bool `msgpack:"runtime,omitempty"`
}

// Table is the cluster layout. Ranges are sorted by Start and tile the key
// space: the first starts at "" and the last ends at "" (unbounded).
type Table struct {
	Gen            uint64       `msgpack:"gen"`
	NamespaceDepth int          `msgpack:"depth"`
	Ranges         []wire.Range `msgpack:"ranges"`
	Shards         []ShardInfo  `msgpack:"shards"`
	Nodes          []Node       `msgpack:"nodes"`
	// RangeMoves are the range moves in flight (ranges.go), NextMove the id the
	// next one gets.
	RangeMoves []Move `msgpack:"moves,omitempty"`
	NextMove   uint64 `msgpack:"next_move,omitempty"`
	// Moves are the replica moves under way (at most one per shard) and
	// Incarnation the counter fresh replica ids are made from (nodes.go).
	Moves       []ReplicaMove `msgpack:"rmoves,omitempty"`
	Incarnation uint64        `msgpack:"inc,omitempty"`
	// NextShard is the id the next created data shard gets (0: one above
	// every id in the table); Retired the shards stopped or stopping;
	// Decisions the last lifecycle changes with their reasons
	// (lifecycle.go).
	NextShard   uint64         `msgpack:"next_shard,omitempty"`
	Retired     []RetiredShard `msgpack:"retired,omitempty"`
	Decisions   []Decision     `msgpack:"decisions,omitempty"`
	DecisionSeq uint64         `msgpack:"decision_seq,omitempty"`
}

// EvenRanges cuts the hashed key space into one range per shard.
func EvenRanges(shards []uint64, gen uint64) []wire.Range {
	n := uint64(len(shards))
	out := make([]wire.Range, n)
	step := ^uint64(0)/n + 1
	for i := range out {
		out[i] = wire.Range{Shard: shards[i], Gen: gen}
		if i > 0 {
			out[i].Start = hashKey(uint64(i) * step)
		}
		if uint64(i) < n-1 {
			out[i].End = hashKey(uint64(i+1) * step)
		}
	}
	return out
}

func hashKey(v uint64) string {
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], v)
	return string(b[:])
}

// Locate returns the range that holds the whole span of a request on path.
// It fails with SpansRanges when the path's subtree is split over several
// ranges (a path shallower than the namespace depth, in a multi-range table).
func (t *Table) Locate(path string) (wire.Range, error) {
	var kb wire.SpanBuf
	start, end := hierarchy.SpanInto(path, t.NamespaceDepth, &kb)
	i := sort.Search(len(t.Ranges), func(i int) bool {
		r := t.Ranges[i]
		return r.End == "" || r.End > start
	})
	if i == len(t.Ranges) {
		return wire.Range{}, wire.Errorf(wire.Internal, "range table has a hole at %x", strings.Clone(start))
	}
	r := t.Ranges[i]
	if !hierarchy.InRange(start, end, r.Start, r.End) {
		return wire.Range{}, wire.Errorf(wire.SpansRanges,
			"the subtree of %s is spread over several shards (paths shallower than depth %d cover many namespaces)",
			path, t.NamespaceDepth)
	}
	return r, nil
}

// Node returns the node with the given id.
func (t *Table) Node(id uint64) (Node, bool) {
	for _, n := range t.Nodes {
		if n.ID == id {
			return n, true
		}
	}
	return Node{}, false
}

// Shard returns the shard with the given id.
func (t *Table) Shard(id uint64) (ShardInfo, bool) {
	for _, s := range t.Shards {
		if s.ID == id {
			return s, true
		}
	}
	return ShardInfo{}, false
}

// RangesOf returns the ranges a shard owns.
func (t *Table) RangesOf(shard uint64) []wire.Range {
	var out []wire.Range
	for _, r := range t.Ranges {
		if r.Shard == shard {
			out = append(out, r)
		}
	}
	return out
}

// Clone returns a deep copy.
func (t *Table) Clone() *Table {
	c := *t
	c.Ranges = append([]wire.Range(nil), t.Ranges...)
	c.Nodes = append([]Node(nil), t.Nodes...)
	c.RangeMoves = append([]Move(nil), t.RangeMoves...)
	c.Shards = make([]ShardInfo, len(t.Shards))
	for i, s := range t.Shards {
		c.Shards[i] = s.clone()
	}
	c.Moves = append([]ReplicaMove(nil), t.Moves...)
	c.Decisions = append([]Decision(nil), t.Decisions...)
	c.Retired = make([]RetiredShard, len(t.Retired))
	for i, r := range t.Retired {
		r.Replicas = append([]uint64(nil), r.Replicas...)
		r.Pending = append([]uint64(nil), r.Pending...)
		c.Retired[i] = r
	}
	return &c
}
