package placement

import (
	"fmt"
	"slices"
	"sort"

	"github.com/vmihailenco/msgpack/v5"
)

// Data shards are created and retired while the cluster runs. Each shard
// walks through a lifecycle recorded here, one command per step, so that
// whichever node leads the meta group next (and drives the steps) finds
// where it stands:
//
//	creating → its replicas' nodes start the new Raft group (the same state
//	           machine and settings as every data shard); the driver waits
//	           until a proposal commits on it (it has a leader), then
//	active   → it serves; ranges move into it with the range-move records
//	           (Fill: the driver moves ranges in until it holds its share)
//	retiring → the driver moves every range out, one move at a time
//	stopping → it holds no range and is gone from Shards: each node that
//	           holds a replica stops it, deletes its data and reports so
//	retired  → every replica's data is gone
//
// A creating shard can be rolled back (retire): it goes straight to
// stopping. Shard ids come from a counter that only grows, so an id is
// never used twice; fencing tokens go with the ranges (a move raises the
// destination's fence floor to the source's), so they never go back.

// ShardState is where a data shard stands in its lifecycle.
type ShardState uint8

// Lifecycle states. ShardActive is the zero value, so shards of a table
// made before any lifecycle command are active.
const (
	ShardActive   ShardState = 0
	ShardCreating ShardState = 1
	ShardRetiring ShardState = 2
	ShardStopping ShardState = 3 // only in Table.Retired
	ShardRetired  ShardState = 4 // only in Table.Retired
)

var shardStateNames = [...]string{"active", "creating", "retiring", "stopping", "retired"}

func (s ShardState) String() string {
	if int(s) < len(shardStateNames) {
		return shardStateNames[s]
	}
	return fmt.Sprintf("state(%d)", uint8(s))
}

// RetiredShard is a shard gone from Shards: stopping while Pending lists
// nodes that still hold its replica's data, retired once none does.
type RetiredShard struct {
	ID       uint64   `msgpack:"id"`
	Replicas []uint64 `msgpack:"replicas"`
	Pending  []uint64 `msgpack:"pending,omitempty"`
	Reason   string   `msgpack:"reason,omitempty"`
}

// State is stopping or retired.
func (r RetiredShard) State() ShardState {
	if len(r.Pending) > 0 {
		return ShardStopping
	}
	return ShardRetired
}

// Decision is one recorded lifecycle change with its reason: who asked
// (an operator or the policy) and why. The table keeps the last
// MaxDecisions.
type Decision struct {
	Seq    uint64 `msgpack:"seq"`
	At     int64  `msgpack:"at"` // unix ms, as the proposer's clock read it
	Action string `msgpack:"action"`
	Shard  uint64 `msgpack:"shard"`
	Reason string `msgpack:"reason,omitempty"`
}

// MaxDecisions bounds the decisions the table keeps; MaxRetired the
// retired shards it remembers (stopping ones are always kept).
const (
	MaxDecisions = 32
	MaxRetired   = 32
)

// MaxShardReplicas bounds the nodes a created shard is replicated on.
const MaxShardReplicas = 7

// ShardCommand is a "shard" meta command.
type ShardCommand struct {
	Op     string   `msgpack:"op"`              // create, activate, filled, retire, stop, removed
	Shard  uint64   `msgpack:"shard,omitempty"` // every op but create
	Nodes  []uint64 `msgpack:"nodes,omitempty"` // create: the replicas' nodes
	Node   uint64   `msgpack:"node,omitempty"`  // removed: the node whose replica's data is gone
	Fill   bool     `msgpack:"fill,omitempty"`  // create: move ranges in once active
	Reason string   `msgpack:"why,omitempty"`
	At     int64    `msgpack:"at,omitempty"` // unix ms, for the decision record
}

// EncodeShard encodes a shard lifecycle command for the meta group.
func EncodeShard(c ShardCommand) []byte {
	b, _ := msgpack.Marshal(&metaCommand{Kind: "shard", Shard: &c})
	return b
}

// ActiveShards returns the shards that take ranges (state active).
func (t *Table) ActiveShards() []ShardInfo {
	var out []ShardInfo
	for _, s := range t.Shards {
		if s.State == ShardActive {
			out = append(out, s)
		}
	}
	return out
}

// Serving returns the shards that may hold ranges, leases or watches
// (active or retiring): the ones a request spread over every shard
// (keepalives, prefix lists and watches) must reach.
func (t *Table) Serving() []ShardInfo {
	out := make([]ShardInfo, 0, len(t.Shards))
	for _, s := range t.Shards {
		if s.State == ShardActive || s.State == ShardRetiring {
			out = append(out, s)
		}
	}
	return out
}

// RetiredShard returns the record of a stopping or retired shard.
func (t *Table) RetiredOf(id uint64) (RetiredShard, bool) {
	for _, r := range t.Retired {
		if r.ID == id {
			return r, true
		}
	}
	return RetiredShard{}, false
}

// NextShardID is the id the next created shard gets.
func (t *Table) NextShardID() uint64 {
	if t.NextShard != 0 {
		return t.NextShard
	}
	next := MetaShard + 1
	for _, s := range t.Shards {
		next = max(next, s.ID+1)
	}
	for _, r := range t.Retired {
		next = max(next, r.ID+1)
	}
	return next
}

func (m *Meta) applyShard(c *ShardCommand) Result {
	t := m.table
	if t == nil || c == nil {
		return refused("no table yet")
	}
	var r Result
	switch c.Op {
	case "create":
		r = t.createShard(c)
	case "activate":
		r = t.activateShard(c.Shard)
	case "filled":
		r = t.filledShard(c.Shard)
	case "retire":
		r = t.retireShard(c.Shard)
	case "stop":
		r = t.stopShard(c.Shard)
	case "removed":
		return t.replicaRemoved(c.Shard, c.Node)
	default:
		return refused("unknown shard command %q", c.Op)
	}
	switch {
	case c.Op == "create" && r.Value != 0:
		t.decide(c, r.Value)
	case r.Value == 1 && c.Op != "filled":
		t.decide(c, c.Shard)
	}
	return r
}

func (t *Table) decide(c *ShardCommand, id uint64) {
	t.DecisionSeq++
	t.Decisions = append(t.Decisions, Decision{Seq: t.DecisionSeq, At: c.At, Action: c.Op, Shard: id, Reason: c.Reason})
	if n := len(t.Decisions) - MaxDecisions; n > 0 {
		t.Decisions = slices.Delete(t.Decisions, 0, n)
	}
}

func (t *Table) createShard(c *ShardCommand) Result {
	if len(c.Nodes) == 0 || len(c.Nodes) > MaxShardReplicas {
		return refused("a new shard needs 1..%d nodes, got %d", MaxShardReplicas, len(c.Nodes))
	}
	nodes := slices.Clone(c.Nodes)
	sort.Slice(nodes, func(i, j int) bool { return nodes[i] < nodes[j] })
	for i, id := range nodes {
		if i > 0 && nodes[i-1] == id {
			return refused("node %d is named twice", id)
		}
		n, ok := t.Node(id)
		if !ok {
			return refused("node %d is not registered", id)
		}
		if n.State == NodeDraining {
			return refused("node %d is draining", id)
		}
	}
	id := t.NextShardID()
	t.NextShard = id + 1
	t.Shards = append(t.Shards, ShardInfo{ID: id, Replicas: nodes, State: ShardCreating, Fill: c.Fill, Reason: c.Reason, Runtime: true})
	return Result{Value: id}
}

func (t *Table) lifecycleIndex(id uint64) int {
	for i, s := range t.Shards {
		if s.ID == id {
			return i
		}
	}
	return -1
}

func (t *Table) activateShard(id uint64) Result {
	i := t.lifecycleIndex(id)
	if i < 0 {
		return refused("no shard %d", id)
	}
	switch t.Shards[i].State {
	case ShardActive:
		return Result{Value: 2} // already: applied, no new decision
	case ShardCreating:
		t.Shards[i].State = ShardActive
		return applied
	}
	return refused("shard %d is %v, not creating", id, t.Shards[i].State)
}

func (t *Table) filledShard(id uint64) Result {
	if i := t.lifecycleIndex(id); i >= 0 {
		t.Shards[i].Fill = false
	}
	return applied
}

// retireShard starts a shard's retirement: an active one moves its ranges
// out first; a creating one (never served) stops at once.
func (t *Table) retireShard(id uint64) Result {
	i := t.lifecycleIndex(id)
	if i < 0 {
		if r, ok := t.RetiredOf(id); ok {
			return refused("shard %d is already %v", id, r.State())
		}
		return refused("no shard %d", id)
	}
	s := &t.Shards[i]
	switch s.State {
	case ShardRetiring:
		return Result{Value: 2}
	case ShardCreating:
		if _, moving := t.Move(id); moving {
			return refused("shard %d is moving a replica", id)
		}
		t.retireNow(i, "rolled back while creating")
		return applied
	}
	if len(t.ActiveShards()) <= 1 {
		return refused("shard %d is the last active shard", id)
	}
	s.State, s.Fill = ShardRetiring, false
	return applied
}

// stopShard ends a retiring shard that holds no range any more.
func (t *Table) stopShard(id uint64) Result {
	i := t.lifecycleIndex(id)
	if i < 0 {
		if _, ok := t.RetiredOf(id); ok {
			return Result{Value: 2}
		}
		return refused("no shard %d", id)
	}
	switch {
	case t.Shards[i].State != ShardRetiring:
		return refused("shard %d is %v, not retiring", id, t.Shards[i].State)
	case len(t.RangesOf(id)) > 0:
		return refused("shard %d still holds %d ranges", id, len(t.RangesOf(id)))
	case t.Moving(id):
		return refused("a range move involves shard %d", id)
	}
	if _, moving := t.Move(id); moving {
		return refused("shard %d is moving a replica", id)
	}
	t.retireNow(i, t.Shards[i].Reason)
	return applied
}

func (t *Table) retireNow(i int, reason string) {
	s := t.Shards[i]
	t.Shards = slices.Delete(t.Shards, i, i+1)
	t.Retired = append(t.Retired, RetiredShard{ID: s.ID, Replicas: slices.Clone(s.Replicas),
		Pending: slices.Clone(s.Replicas), Reason: reason})
	t.trimRetired()
}

func (t *Table) trimRetired() {
	done := 0
	for _, r := range t.Retired {
		if len(r.Pending) == 0 {
			done++
		}
	}
	for j := 0; j < len(t.Retired) && done > MaxRetired; {
		if len(t.Retired[j].Pending) == 0 {
			t.Retired = slices.Delete(t.Retired, j, j+1)
			done--
			continue
		}
		j++
	}
}

// replicaRemoved records that node deleted its replica of a stopping shard.
func (t *Table) replicaRemoved(id, node uint64) Result {
	for i := range t.Retired {
		r := &t.Retired[i]
		if r.ID != id {
			continue
		}
		if j := slices.Index(r.Pending, node); j >= 0 {
			r.Pending = slices.Delete(r.Pending, j, j+1)
			if len(r.Pending) == 0 {
				t.trimRetired()
			}
		}
		return applied
	}
	return refused("shard %d is not stopping", id)
}

// dropPending forgets a removed node's part in stopping shards (its data
// went with it).
func (t *Table) dropPending(node uint64) {
	for i := range t.Retired {
		if j := slices.Index(t.Retired[i].Pending, node); j >= 0 {
			t.Retired[i].Pending = slices.Delete(t.Retired[i].Pending, j, j+1)
		}
	}
	t.trimRetired()
}
