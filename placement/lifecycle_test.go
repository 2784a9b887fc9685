package placement

import (
	"strings"
	"testing"
)

func shardCmd(c ShardCommand) []byte { return EncodeShard(c) }

func refusedWith(t *testing.T, what string, data []byte, value uint64, want string) {
	t.Helper()
	if value != 0 || !strings.Contains(string(data), want) {
		t.Fatalf("%s: value %d, %q; want a refusal naming %q", what, value, data, want)
	}
}

// A shard walks creating → active → retiring → stopping → retired; ids are
// never reused, and each step refuses what does not fit where it stands.
func TestShardLifecycleSteps(t *testing.T) {
	m, apply := metaWith(t)
	r := apply(shardCmd(ShardCommand{Op: "create", Nodes: []uint64{3, 1, 2}, Reason: "operator"}))
	if r.Value != 4 {
		t.Fatalf("create: value %d %q, want shard 4", r.Value, r.Data)
	}
	si, _ := table(m).Shard(4)
	if si.State != ShardCreating || len(si.Replicas) != 3 || si.Replicas[0] != 1 {
		t.Fatalf("created shard: %+v", si)
	}
	// Nothing moves into a shard that is not active.
	mv, _ := EncodeRange(RangeCommand{Op: "move", Key: table(m).Ranges[0].Start, Shard: 4})
	if r := apply(mv); r.Value != 0 || !strings.Contains(string(r.Data), "creating") {
		t.Fatalf("a move into a creating shard: %d %q", r.Value, r.Data)
	}
	if r := apply(shardCmd(ShardCommand{Op: "activate", Shard: 4})); r.Value != 1 {
		t.Fatalf("activate: %d %q", r.Value, r.Data)
	}
	if r := apply(shardCmd(ShardCommand{Op: "activate", Shard: 4})); r.Value == 0 {
		t.Fatalf("a repeated activate must be harmless: %q", r.Data)
	}
	// Retire shard 2: it must move its range out before it may stop.
	if r := apply(shardCmd(ShardCommand{Op: "retire", Shard: 2})); r.Value != 1 {
		t.Fatalf("retire: %d %q", r.Value, r.Data)
	}
	r = apply(shardCmd(ShardCommand{Op: "stop", Shard: 2}))
	refusedWith(t, "stop with ranges", r.Data, r.Value, "still holds")
	key := table(m).RangesOf(2)[0].Start
	mv, _ = EncodeRange(RangeCommand{Op: "move", Key: key, Shard: 4})
	if r := apply(mv); r.Value != 1 {
		t.Fatalf("move out: %q", r.Data)
	}
	r = apply(shardCmd(ShardCommand{Op: "stop", Shard: 2}))
	refusedWith(t, "stop during a move", r.Data, r.Value, "still holds")
	for _, op := range []string{"step", "step", "switch", "end"} {
		c := RangeCommand{Op: op, Move: 1}
		if op == "step" {
			c.Step = table(m).RangeMoves[0].Step + 1
		}
		b, _ := EncodeRange(c)
		if r := apply(b); r.Value != 1 {
			t.Fatalf("%s: %q", op, r.Data)
		}
	}
	if r := apply(shardCmd(ShardCommand{Op: "stop", Shard: 2})); r.Value != 1 {
		t.Fatalf("stop: %q", r.Data)
	}
	tab := table(m)
	if _, ok := tab.Shard(2); ok {
		t.Fatal("a stopped shard is still among the shards")
	}
	rs, ok := tab.RetiredOf(2)
	if !ok || rs.State() != ShardStopping || len(rs.Pending) != 3 {
		t.Fatalf("stopping record: %+v", rs)
	}
	for _, n := range []uint64{1, 2, 3, 3} {
		if r := apply(shardCmd(ShardCommand{Op: "removed", Shard: 2, Node: n})); r.Value != 1 {
			t.Fatalf("removed on node %d: %q", n, r.Data)
		}
	}
	if rs, _ := table(m).RetiredOf(2); rs.State() != ShardRetired {
		t.Fatalf("after every replica removed: %v", rs.State())
	}
	// The next shard gets a fresh id, never 2 again.
	if r := apply(shardCmd(ShardCommand{Op: "create", Nodes: []uint64{1}})); r.Value != 5 {
		t.Fatalf("next create: %d %q", r.Value, r.Data)
	}
	// Rolled back while creating: straight to stopping.
	if r := apply(shardCmd(ShardCommand{Op: "retire", Shard: 5})); r.Value != 1 {
		t.Fatalf("roll back: %q", r.Data)
	}
	if rs, ok := table(m).RetiredOf(5); !ok || rs.State() != ShardStopping {
		t.Fatalf("rolled-back shard: %+v", rs)
	}
	if d := table(m).Decisions; len(d) != 6 || d[0].Action != "create" || d[0].Reason != "operator" {
		t.Fatalf("decisions: %+v", d)
	}
}

func TestShardLifecycleRefusals(t *testing.T) {
	m, apply := metaWith(t)
	cases := []struct {
		c    ShardCommand
		want string
	}{
		{ShardCommand{Op: "create"}, "needs 1..7 nodes"},
		{ShardCommand{Op: "create", Nodes: []uint64{1, 1}}, "named twice"},
		{ShardCommand{Op: "create", Nodes: []uint64{9}}, "not registered"},
		{ShardCommand{Op: "create", Nodes: make([]uint64, 8)}, "needs 1..7 nodes"},
		{ShardCommand{Op: "retire", Shard: 9}, "no shard 9"},
		{ShardCommand{Op: "stop", Shard: 2}, "not retiring"},
		{ShardCommand{Op: "removed", Shard: 2, Node: 1}, "not stopping"},
		{ShardCommand{Op: "bogus"}, "unknown shard command"},
	}
	for _, c := range cases {
		r := apply(shardCmd(c.c))
		refusedWith(t, c.c.Op, r.Data, r.Value, c.want)
	}
	if r := apply(shardCmd(ShardCommand{Op: "retire", Shard: 2})); r.Value != 1 {
		t.Fatal(string(r.Data))
	}
	r := apply(shardCmd(ShardCommand{Op: "retire", Shard: 3}))
	refusedWith(t, "retire the last active shard", r.Data, r.Value, "last active shard")
	apply(NodeStateCommand(3, NodeDraining))
	r = apply(shardCmd(ShardCommand{Op: "create", Nodes: []uint64{3}}))
	refusedWith(t, "create on a draining node", r.Data, r.Value, "draining")
	if len(table(m).Decisions) != 1 {
		t.Fatalf("refused commands must not be recorded as decisions: %+v", table(m).Decisions)
	}
}
