package placement

import (
	"fmt"
	"sort"

	"github.com/vmihailenco/msgpack/v5"
)

// Machines come and go: nodes join (as non-voting members of the meta group,
// so they read the table locally), drain (every replica moves off) and leave.
// A replica moves between nodes by Raft membership changes, one shard at a
// time, as a sequence of steps recorded here so that whichever node drives
// it next, after any crash, knows where it stands:
//
//	Planned  → the shard's leader adds the target as a non-voting member
//	Learner  → the target starts its replica, catches up, reports it
//	CaughtUp → the shard's leader promotes the target to voter
//	Voter    → the shard's leader removes the source (handing leadership
//	           to another voter first if it is the source), then Done
//	Aborting → the shard's leader removes the learner, then the move is gone
//
// A move can be aborted until the target votes; after that it only goes
// forward. Each step is recorded only by a command that names the step it
// expects, so a driver that lost its leadership cannot move a record twice.

// NodeDraining marks a node whose replicas are being moved off.
const NodeDraining = "draining"

// MoveStep is where a replica move stands.
type MoveStep uint8

// Replica move steps (see above). MoveDone is only ever a command's target:
// a move that reaches it is deleted.
const (
	MoveDone     MoveStep = 0
	MovePlanned  MoveStep = 1
	MoveLearner  MoveStep = 2
	MoveCaughtUp MoveStep = 3
	MoveVoter    MoveStep = 4
	MoveAborting MoveStep = 5
)

var stepNames = [...]string{"done", "planned", "learner", "caught-up", "voter", "aborting"}

func (s MoveStep) String() string {
	if int(s) < len(stepNames) {
		return stepNames[s]
	}
	return fmt.Sprintf("step(%d)", uint8(s))
}

// ReplicaMove moves shard Shard's replica from node From to node To, whose
// new replica has Raft id ToRID.
type ReplicaMove struct {
	Shard uint64   `msgpack:"shard"`
	From  uint64   `msgpack:"from"`
	To    uint64   `msgpack:"to"`
	ToRID uint64   `msgpack:"to_rid"`
	Step  MoveStep `msgpack:"step"`
}

// Replica ids: the low 32 bits are the node id, the high bits an
// incarnation (0 for the initial layout, where replica id = node id).
const nodeIDBits = 32

// MaxNodeID is the largest node id a replica id can carry.
const MaxNodeID = 1<<nodeIDBits - 1

// NodeOf returns the node a replica id lives on.
func NodeOf(rid uint64) uint64 { return rid & MaxNodeID }

// RID returns the replica id of node's replica, 0 when it has none.
func (s ShardInfo) RID(node uint64) uint64 {
	for i, n := range s.Replicas {
		if n == node {
			if i < len(s.RIDs) {
				return s.RIDs[i]
			}
			return n
		}
	}
	return 0
}

func (s ShardInfo) clone() ShardInfo {
	c := ShardInfo{ID: s.ID, Replicas: append([]uint64(nil), s.Replicas...), State: s.State, Fill: s.Fill, Reason: s.Reason, Runtime: s.Runtime}
	if s.RIDs != nil {
		c.RIDs = append([]uint64(nil), s.RIDs...)
	}
	return c
}

// Has reports whether node holds a replica.
func (s ShardInfo) Has(node uint64) bool { return s.RID(node) != 0 }

// MetaRID is the node's replica id in the meta group.
func (n Node) MetaRID() uint64 {
	if n.MetaReplica != 0 {
		return n.MetaReplica
	}
	return n.ID
}

// Move returns the move under way for a shard.
func (t *Table) Move(shard uint64) (ReplicaMove, bool) {
	for _, m := range t.Moves {
		if m.Shard == shard {
			return m, true
		}
	}
	return ReplicaMove{}, false
}

// ReplicaCount returns how many data replicas node holds.
func (t *Table) ReplicaCount(node uint64) int {
	n := 0
	for _, s := range t.Shards {
		if s.Has(node) {
			n++
		}
	}
	return n
}

// ActiveNodes returns the ids of the nodes that may hold replicas and
// leaderships (registered and not draining), ascending.
func (t *Table) ActiveNodes() []uint64 {
	var out []uint64
	for _, n := range t.Nodes {
		if n.State != NodeDraining {
			out = append(out, n.ID)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

// nodeCommand is one change to nodes or replica placement.
type nodeCommand struct {
	Op     string       `msgpack:"op"` // join, state, remove, move, step
	Node   *Node        `msgpack:"node,omitempty"`
	ID     uint64       `msgpack:"id,omitempty"`
	State  string       `msgpack:"state,omitempty"`
	Move   *ReplicaMove `msgpack:"move,omitempty"`
	Member bool         `msgpack:"member,omitempty"` // join: the node already runs its meta replica, Node.MetaReplica
	Expect MoveStep     `msgpack:"expect,omitempty"`
}

func encodeNodes(c nodeCommand) []byte {
	b, _ := msgpack.Marshal(&metaCommand{Kind: "nodes", Nodes: &c})
	return b
}

// JoinCommand registers a node, or updates the addresses of a registered
// one (keeping its state). The result's Value is its meta replica id: fresh
// for a new node, the recorded one for a node registered before.
func JoinCommand(n Node) []byte { return encodeNodes(nodeCommand{Op: "join", Node: &n}) }

// RegisterCommand registers a node that already runs a meta replica (an
// initial member, or a joined node registering again): its
// Node.MetaReplica is taken as it is.
func RegisterCommand(n Node) []byte {
	return encodeNodes(nodeCommand{Op: "join", Node: &n, Member: true})
}

// NodeStateCommand sets a node's state ("" active, NodeDraining).
func NodeStateCommand(id uint64, state string) []byte {
	return encodeNodes(nodeCommand{Op: "state", ID: id, State: state})
}

// RemoveNodeCommand deletes a node that holds no replica.
func RemoveNodeCommand(id uint64) []byte { return encodeNodes(nodeCommand{Op: "remove", ID: id}) }

// PlanMoveCommand records a new move of shard's replica from → to. The
// result's Value is the target's new replica id.
func PlanMoveCommand(shard, from, to uint64) []byte {
	return encodeNodes(nodeCommand{Op: "move", Move: &ReplicaMove{Shard: shard, From: from, To: to}})
}

// StepCommand advances the move identified by (shard, toRID) from expect to
// step (MoveDone ends it).
func StepCommand(shard, toRID uint64, expect, step MoveStep) []byte {
	return encodeNodes(nodeCommand{Op: "step", Move: &ReplicaMove{Shard: shard, ToRID: toRID, Step: step}, Expect: expect})
}

// refused is a command that changed nothing; Data says why.
func refused(format string, args ...any) Result {
	return Result{Data: []byte(fmt.Sprintf(format, args...))}
}

// applyNodes applies one node command. Value 0 with Data = refused.
func (m *Meta) applyNodes(c *nodeCommand) Result {
	t := m.table
	if t == nil {
		return refused("no table yet")
	}
	switch c.Op {
	case "join":
		return t.join(c.Node, c.Member)
	case "state":
		for i := range t.Nodes {
			if t.Nodes[i].ID == c.ID {
				t.Nodes[i].State = c.State
				return Result{Value: 1}
			}
		}
		return refused("node %d is not registered", c.ID)
	case "remove":
		return t.removeNode(c.ID)
	case "move":
		return t.planMove(c.Move)
	case "step":
		return t.stepMove(c.Move, c.Expect)
	}
	return refused("unknown node command %q", c.Op)
}

func (t *Table) join(n *Node, member bool) Result {
	if n == nil || n.ID == 0 || n.ID > MaxNodeID || n.RaftAddr == "" {
		return refused("a joining node needs an id in 1..%d and a raft address", MaxNodeID)
	}
	for i, old := range t.Nodes {
		if old.ID == n.ID {
			if old.RaftAddr != n.RaftAddr {
				return refused("node %d is registered with raft address %s, not %s", n.ID, old.RaftAddr, n.RaftAddr)
			}
			if !member {
				n.MetaReplica = old.MetaReplica
			}
			n.State = old.State
			t.Nodes[i] = *n
			return Result{Value: old.MetaRID()}
		}
		if old.RaftAddr == n.RaftAddr {
			return refused("raft address %s belongs to node %d", n.RaftAddr, old.ID)
		}
	}
	n.State = ""
	if !member {
		n.MetaReplica = t.newRID(n.ID)
	}
	t.Nodes = append(t.Nodes, *n)
	return Result{Value: n.MetaRID()}
}

func (t *Table) newRID(node uint64) uint64 {
	t.Incarnation++
	return node | t.Incarnation<<nodeIDBits
}

func (t *Table) removeNode(id uint64) Result {
	if n := t.ReplicaCount(id); n > 0 {
		return refused("node %d still holds %d replicas: drain it first", id, n)
	}
	for _, m := range t.Moves {
		if m.From == id || m.To == id {
			return refused("node %d takes part in the move of shard %d", id, m.Shard)
		}
	}
	for i, n := range t.Nodes {
		if n.ID == id {
			t.Nodes = append(t.Nodes[:i], t.Nodes[i+1:]...)
			t.dropPending(id)
			return Result{Value: 1}
		}
	}
	return refused("node %d is not registered", id)
}

func (t *Table) planMove(mv *ReplicaMove) Result {
	if mv == nil {
		return refused("no move")
	}
	si, ok := t.Shard(mv.Shard)
	switch {
	case !ok:
		return refused("shard %d does not exist", mv.Shard)
	case si.State == ShardCreating:
		return refused("shard %d is still being created", mv.Shard)
	case !si.Has(mv.From):
		return refused("node %d holds no replica of shard %d", mv.From, mv.Shard)
	case si.Has(mv.To):
		return refused("node %d already holds a replica of shard %d", mv.To, mv.Shard)
	}
	if cur, busy := t.Move(mv.Shard); busy {
		return refused("shard %d is already moving a replica (%d → %d, %v)", mv.Shard, cur.From, cur.To, cur.Step)
	}
	to, ok := t.Node(mv.To)
	if !ok || to.State == NodeDraining {
		return refused("node %d is not an active member", mv.To)
	}
	m := ReplicaMove{Shard: mv.Shard, From: mv.From, To: mv.To, ToRID: t.newRID(mv.To), Step: MovePlanned}
	t.Moves = append(t.Moves, m)
	return Result{Value: m.ToRID}
}

func (t *Table) stepMove(want *ReplicaMove, expect MoveStep) Result {
	if want == nil {
		return refused("no move")
	}
	idx := -1
	for i, m := range t.Moves {
		if m.Shard == want.Shard && m.ToRID == want.ToRID {
			idx = i
		}
	}
	if idx < 0 {
		return refused("no such move of shard %d", want.Shard)
	}
	m := &t.Moves[idx]
	if m.Step != expect {
		return refused("move of shard %d is at %v, not %v", m.Shard, m.Step, expect)
	}
	ok := false
	switch want.Step {
	case MoveLearner, MoveCaughtUp, MoveVoter:
		ok = want.Step == expect+1
	case MoveAborting:
		ok = expect < MoveVoter
	case MoveDone:
		ok = expect == MoveVoter || expect == MoveAborting
	}
	if !ok {
		return refused("move of shard %d cannot go from %v to %v", m.Shard, expect, want.Step)
	}
	si := t.shardIndex(m.Shard)
	switch {
	case want.Step == MoveVoter:
		t.Shards[si].add(m.To, m.ToRID)
	case want.Step == MoveDone && expect == MoveVoter:
		t.Shards[si].remove(m.From)
	}
	if want.Step == MoveDone {
		t.Moves = append(t.Moves[:idx], t.Moves[idx+1:]...)
	} else {
		m.Step = want.Step
	}
	return Result{Value: 1}
}

func (t *Table) shardIndex(id uint64) int {
	for i, s := range t.Shards {
		if s.ID == id {
			return i
		}
	}
	panic(fmt.Sprintf("placement: move of unknown shard %d", id))
}

func (s *ShardInfo) add(node, rid uint64) {
	if s.RIDs == nil && rid != node {
		s.RIDs = append([]uint64(nil), s.Replicas...)
	}
	s.Replicas = append(s.Replicas, node)
	if s.RIDs != nil {
		s.RIDs = append(s.RIDs, rid)
	}
}

func (s *ShardInfo) remove(node uint64) {
	for i, n := range s.Replicas {
		if n == node {
			s.Replicas = append(s.Replicas[:i], s.Replicas[i+1:]...)
			if s.RIDs != nil {
				s.RIDs = append(s.RIDs[:i], s.RIDs[i+1:]...)
			}
			return
		}
	}
}

// DrainMoves plans the next moves off draining nodes: for each shard with a
// replica on a draining node and no move under way, a target among the
// active nodes without a replica of it, the one holding fewest replicas
// (then the lowest id). At most limit moves are under way at once.
func (t *Table) DrainMoves(limit int) []ReplicaMove {
	var out []ReplicaMove
	load := map[uint64]int{}
	for _, n := range t.ActiveNodes() {
		load[n] = t.ReplicaCount(n)
	}
	busy := len(t.Moves)
	for _, m := range t.Moves {
		load[m.To]++
	}
	for _, n := range t.Nodes {
		if n.State != NodeDraining {
			continue
		}
		for _, s := range t.Shards {
			if busy >= limit {
				return out
			}
			if _, moving := t.Move(s.ID); moving || !s.Has(n.ID) || s.State == ShardCreating {
				continue
			}
			to := leastLoaded(load, s)
			if to == 0 {
				continue // no active node without a replica: nowhere to go
			}
			out = append(out, ReplicaMove{Shard: s.ID, From: n.ID, To: to})
			load[to]++
			busy++
		}
	}
	return out
}

func leastLoaded(load map[uint64]int, s ShardInfo) uint64 {
	best, bestLoad := uint64(0), 0
	for n, l := range load {
		if s.Has(n) {
			continue
		}
		if best == 0 || l < bestLoad || l == bestLoad && n < best {
			best, bestLoad = n, l
		}
	}
	return best
}

// RefusedError is a node or replica change the meta group refused.
type RefusedError struct{ Msg string }

func (e *RefusedError) Error() string { return "placement: " + e.Msg }
