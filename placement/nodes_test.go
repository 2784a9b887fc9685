package placement

import (
	"bytes"
	"strings"
	"testing"
)

// metaWith is a meta state machine with a 3-node, 2-shard table.
func metaWith(t *testing.T) (*Meta, func(cmd []byte) Result) {
	t.Helper()
	m := NewMeta()
	tab := testTable(2)
	for _, s := range []uint64{2, 3} {
		tab.Shards = append(tab.Shards, ShardInfo{ID: s, Replicas: []uint64{1, 2, 3}})
	}
	apply := func(cmd []byte) Result { return m.Apply(cmd) }
	init, _ := InitCommand(tab)
	apply(init)
	for id := uint64(1); id <= 3; id++ {
		apply(RegisterCommand(Node{ID: id, RaftAddr: "r" + string(rune('0'+id))}))
	}
	return m, apply
}

func table(m *Meta) *Table {
	v, _ := m.Lookup(TableQuery{})
	return v.(*Table)
}

func TestJoinGivesAFreshMetaReplicaOnce(t *testing.T) {
	m, apply := metaWith(t)
	if r := apply(RegisterCommand(Node{ID: 2, RaftAddr: "r2"})); r.Value != 2 {
		t.Fatalf("an initial member keeps meta replica id = node id, got %d", r.Value)
	}
	first := apply(JoinCommand(Node{ID: 4, RaftAddr: "r4"})).Value
	if first == 4 || NodeOf(first) != 4 {
		t.Fatalf("a joining node needs a fresh replica id on node 4, got %d", first)
	}
	if again := apply(JoinCommand(Node{ID: 4, RaftAddr: "r4", ClientAddr: "c4"})).Value; again != first {
		t.Fatalf("joining twice changed the meta replica id: %d then %d", first, again)
	}
	if r := apply(JoinCommand(Node{ID: 5, RaftAddr: "r4"})); r.Value != 0 || len(r.Data) == 0 {
		t.Fatal("a second node on the same raft address must be refused")
	}
	apply(NodeStateCommand(4, NodeDraining))
	apply(JoinCommand(Node{ID: 4, RaftAddr: "r4"}))
	if n, _ := table(m).Node(4); n.State != NodeDraining || n.ClientAddr != "" {
		t.Fatalf("re-registering must keep the state and take the new addresses: %+v", n)
	}
	// Removed, then joined again: a new incarnation.
	apply(RemoveNodeCommand(4))
	if rejoin := apply(JoinCommand(Node{ID: 4, RaftAddr: "r4"})).Value; rejoin == first || NodeOf(rejoin) != 4 {
		t.Fatalf("a node that joins again after removal must get a new replica id: %d then %d", first, rejoin)
	}
}

func TestReplicaMoveStepsAndRefusals(t *testing.T) {
	m, apply := metaWith(t)
	apply(JoinCommand(Node{ID: 4, RaftAddr: "r4"}))
	refusedBecause := func(r Result, why string) {
		t.Helper()
		if r.Value != 0 || !strings.Contains(string(r.Data), why) {
			t.Fatalf("want refusal containing %q, got value %d data %q", why, r.Value, r.Data)
		}
	}
	refusedBecause(apply(PlanMoveCommand(2, 4, 1)), "holds no replica")
	refusedBecause(apply(PlanMoveCommand(2, 1, 2)), "already holds")
	refusedBecause(apply(PlanMoveCommand(9, 1, 4)), "does not exist")
	refusedBecause(apply(PlanMoveCommand(2, 1, 7)), "not an active member")
	rid := apply(PlanMoveCommand(2, 1, 4)).Value
	if NodeOf(rid) != 4 || rid == 4 {
		t.Fatalf("move target replica id %d", rid)
	}
	refusedBecause(apply(PlanMoveCommand(2, 2, 4)), "already moving")
	refusedBecause(apply(StepCommand(2, rid, MovePlanned, MoveCaughtUp)), "cannot go")
	refusedBecause(apply(StepCommand(2, rid, MoveLearner, MoveCaughtUp)), "is at planned")
	refusedBecause(apply(RemoveNodeCommand(4)), "takes part")
	for _, st := range [][2]MoveStep{{MovePlanned, MoveLearner}, {MoveLearner, MoveCaughtUp}, {MoveCaughtUp, MoveVoter}} {
		if r := apply(StepCommand(2, rid, st[0], st[1])); r.Value != 1 {
			t.Fatalf("%v → %v refused: %s", st[0], st[1], r.Data)
		}
	}
	si, _ := table(m).Shard(2)
	if !si.Has(4) || si.RID(4) != rid || !si.Has(1) {
		t.Fatalf("at voter both source and target are replicas: %+v", si)
	}
	refusedBecause(apply(StepCommand(2, rid, MoveVoter, MoveAborting)), "cannot go")
	apply(StepCommand(2, rid, MoveVoter, MoveDone))
	tab := table(m)
	si, _ = tab.Shard(2)
	if si.Has(1) || si.RID(2) != 2 || si.RID(4) != rid || len(tab.Moves) != 0 {
		t.Fatalf("after the move: %+v, moves %v", si, tab.Moves)
	}
	if tab.ReplicaCount(1) != 1 || tab.ReplicaCount(4) != 1 {
		t.Fatalf("replica counts: node 1 %d, node 4 %d", tab.ReplicaCount(1), tab.ReplicaCount(4))
	}
}

func TestAbortLeavesTheShardAsItWas(t *testing.T) {
	m, apply := metaWith(t)
	apply(JoinCommand(Node{ID: 4, RaftAddr: "r4"}))
	rid := apply(PlanMoveCommand(3, 2, 4)).Value
	apply(StepCommand(3, rid, MovePlanned, MoveLearner))
	apply(StepCommand(3, rid, MoveLearner, MoveAborting))
	apply(StepCommand(3, rid, MoveAborting, MoveDone))
	tab := table(m)
	si, _ := tab.Shard(3)
	if len(tab.Moves) != 0 || si.Has(4) || !si.Has(2) || len(si.Replicas) != 3 {
		t.Fatalf("after abort: %+v moves %v", si, tab.Moves)
	}
	if again := apply(PlanMoveCommand(3, 2, 4)).Value; again == rid || again == 0 {
		t.Fatalf("a retried move must get a new replica id: %d then %d", rid, again)
	}
}

func TestDrainMovesGoToLeastLoadedActiveNodes(t *testing.T) {
	m, apply := metaWith(t)
	apply(JoinCommand(Node{ID: 4, RaftAddr: "r4"}))
	apply(JoinCommand(Node{ID: 5, RaftAddr: "r5"}))
	apply(NodeStateCommand(1, NodeDraining))
	moves := table(m).DrainMoves(2)
	if len(moves) != 2 {
		t.Fatalf("want two moves off node 1, got %v", moves)
	}
	if moves[0].From != 1 || moves[1].From != 1 || moves[0].To == moves[1].To {
		t.Fatalf("moves must leave node 1 for different idle nodes: %v", moves)
	}
	for _, mv := range moves {
		if mv.To != 4 && mv.To != 5 {
			t.Fatalf("a move went to a loaded node: %v", mv)
		}
	}
	if got := table(m).DrainMoves(0); len(got) != 0 {
		t.Fatalf("limit 0 plans nothing, got %v", got)
	}
	if active := table(m).ActiveNodes(); len(active) != 4 || active[0] != 2 {
		t.Fatalf("active nodes %v", active)
	}
}

func TestMovesSurviveSnapshot(t *testing.T) {
	m, apply := metaWith(t)
	apply(JoinCommand(Node{ID: 4, RaftAddr: "r4"}))
	rid := apply(PlanMoveCommand(2, 1, 4)).Value
	apply(StepCommand(2, rid, MovePlanned, MoveLearner))
	var buf bytes.Buffer
	if err := m.SaveSnapshot(&buf); err != nil {
		t.Fatal(err)
	}
	m2 := NewMeta()
	if err := m2.RecoverFromSnapshot(&buf); err != nil {
		t.Fatal(err)
	}
	h1, _ := m.GetHash()
	h2, _ := m2.GetHash()
	if h1 != h2 {
		t.Fatal("recovered meta differs")
	}
	mv, ok := table(m2).Move(2)
	if !ok || mv.Step != MoveLearner || mv.ToRID != rid {
		t.Fatalf("move lost in the snapshot: %+v", mv)
	}
	// The incarnation counter survives too, so the next id is new.
	if table(m2).Incarnation != table(m).Incarnation || table(m2).Incarnation == 0 {
		t.Fatalf("incarnation counter %d after recovery, %d before", table(m2).Incarnation, table(m).Incarnation)
	}
}
