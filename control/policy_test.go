package control

import (
	"strings"
	"testing"
	"time"

	"github.com/wardenlock/warden/internal/cpuload"
	"github.com/wardenlock/warden/placement"
)

func policyTable(shards ...uint64) *placement.Table {
	t := &placement.Table{Gen: 1, NamespaceDepth: 2, Ranges: placement.EvenRanges(shards, 1)}
	for _, id := range shards {
		t.Shards = append(t.Shards, placement.ShardInfo{ID: id, Replicas: []uint64{1, 2, 3}})
	}
	for n := uint64(1); n <= 3; n++ {
		t.Nodes = append(t.Nodes, placement.Node{ID: n, RaftAddr: "r"})
	}
	return t
}

func reading(leader map[uint64]float64, shard map[uint64]float64) *PolicyState {
	return &PolicyState{LeaderOps: leader, ShardOps: shard}
}

// A saturated leader adds a shard only after Sustain, only when another
// node has room, and not again within the cooldown.
func TestPolicyAddsAfterSustainedSaturation(t *testing.T) {
	p := ShardPolicy{Auto: true, SaturatedOps: 1000, IdleOps: 5, Sustain: 30 * time.Second,
		IdleFor: time.Minute, Cooldown: time.Minute}.WithDefaults()
	tab := policyTable(2)
	pm := &policyMemo{}
	t0 := time.Unix(1000, 0)
	hot := reading(map[uint64]float64{1: 5000, 2: 0, 3: 0}, map[uint64]float64{2: 5000})
	for i := 0; i < 6; i++ {
		d := decideShards(tab, hot, p, pm, t0.Add(time.Duration(i)*5*time.Second))
		if d.action != "" {
			t.Fatalf("decided %q after %ds of saturation", d.action, i*5)
		}
	}
	d := decideShards(tab, hot, p, pm, t0.Add(30*time.Second))
	if d.action != "create" || !strings.Contains(d.reason, "node 1") || !strings.Contains(d.reason, "room") {
		t.Fatalf("after 30 s saturated: %+v", d)
	}
	// A dip below the threshold starts the clock again.
	pm = &policyMemo{}
	decideShards(tab, hot, p, pm, t0)
	decideShards(tab, reading(map[uint64]float64{1: 900, 2: 0, 3: 0}, map[uint64]float64{2: 900}), p, pm, t0.Add(20*time.Second))
	if d := decideShards(tab, hot, p, pm, t0.Add(40*time.Second)); d.action != "" {
		t.Fatalf("saturation was interrupted, yet: %+v", d)
	}
	// No room: every node busy.
	pm = &policyMemo{}
	busy := reading(map[uint64]float64{1: 5000, 2: 800, 3: 700}, map[uint64]float64{2: 5000})
	decideShards(tab, busy, p, pm, t0)
	if d := decideShards(tab, busy, p, pm, t0.Add(time.Minute)); d.action != "" || !strings.Contains(d.verdict, "no other node has room") {
		t.Fatalf("no room: %+v", d)
	}
	// Cooldown after a decision.
	pm = &policyMemo{lastDecision: t0}
	decideShards(tab, hot, p, pm, t0)
	if d := decideShards(tab, hot, p, pm, t0.Add(45*time.Second)); d.action != "" || !strings.Contains(d.verdict, "cooling down") {
		t.Fatalf("within the cooldown: %+v", d)
	}
	// Nothing while a shard is being filled.
	tab.Shards = append(tab.Shards, placement.ShardInfo{ID: 3, Replicas: []uint64{1, 2, 3}, Fill: true})
	pm = &policyMemo{}
	decideShards(tab, hot, p, pm, t0)
	if d := decideShards(tab, hot, p, pm, t0.Add(time.Minute)); d.action != "" || !strings.Contains(d.verdict, "waiting") {
		t.Fatalf("while filling: %+v", d)
	}
}

// An idle shard is retired after IdleFor, never the last one, and never
// when the rest would be half saturated.
func TestPolicyRetiresIdleShards(t *testing.T) {
	p := ShardPolicy{Auto: true, SaturatedOps: 1000, IdleOps: 5, IdleFor: time.Minute}.WithDefaults()
	tab := policyTable(2, 3)
	pm := &policyMemo{}
	t0 := time.Unix(1000, 0)
	quiet := reading(map[uint64]float64{1: 100, 2: 1, 3: 0}, map[uint64]float64{2: 100, 3: 1})
	if d := decideShards(tab, quiet, p, pm, t0.Add(59*time.Second)); d.action != "" {
		t.Fatalf("retired before IdleFor: %+v", d)
	}
	d := decideShards(tab, quiet, p, pm, t0.Add(61*time.Second))
	if d.action != "" {
		t.Fatalf("the idle clock starts at the first reading: %+v", d)
	}
	d = decideShards(tab, quiet, p, pm, t0.Add(121*time.Second))
	if d.action != "retire" || d.shard != 3 {
		t.Fatalf("idle shard 3 after IdleFor: %+v", d)
	}
	one := policyTable(2)
	pm = &policyMemo{}
	idle := reading(map[uint64]float64{1: 0, 2: 0, 3: 0}, map[uint64]float64{2: 0})
	decideShards(one, idle, p, pm, t0)
	if d := decideShards(one, idle, p, pm, t0.Add(time.Hour)); d.action != "" {
		t.Fatalf("retired the last shard: %+v", d)
	}
	// Shard 3 idle, but the cluster is busy: the rest would be over half
	// saturated per node.
	pm = &policyMemo{}
	loaded := reading(map[uint64]float64{1: 900, 2: 900, 3: 0}, map[uint64]float64{2: 1800, 3: 0})
	decideShards(tab, loaded, p, pm, t0)
	if d := decideShards(tab, loaded, p, pm, t0.Add(time.Hour)); d.action != "" {
		t.Fatalf("retired a shard of a busy cluster: %+v", d)
	}
}

func TestPolicyValidate(t *testing.T) {
	if err := (ShardPolicy{SaturatedOps: 100, IdleOps: 60}).Validate(); err == nil {
		t.Fatal("an idle threshold over half the saturated one must be refused")
	}
	if err := (ShardPolicy{SaturatedCPU: 1.5}).Validate(); err == nil {
		t.Fatal("a saturated CPU share over 1 must be refused")
	}
	if err := (ShardPolicy{MinShards: 5, MaxShards: 2}).Validate(); err == nil {
		t.Fatal("min over max must be refused")
	}
}

// With CPU read, a leader saturates at whatever rate its machine allows,
// and a node is room for a new leader only when half the saturated node's
// CPU would fit under its own limit: on 3 equal machines running one
// shard, whose followers are busy too, the layout stays; a fourth, idle
// machine is room.
func TestPolicyReadsCPU(t *testing.T) {
	p := ShardPolicy{Auto: true, IdleOps: 5, Sustain: 10 * time.Second, Cooldown: time.Minute}.WithDefaults()
	t0 := time.Unix(1000, 0)
	quota := func(used float64) cpuload.Reading { return cpuload.Reading{Used: used, Capacity: 0.25} }
	three := policyTable(2)
	st := &PolicyState{LeaderOps: map[uint64]float64{1: 10000, 2: 0, 3: 0}, ShardOps: map[uint64]float64{2: 10000},
		NodeCPU: map[uint64]cpuload.Reading{1: quota(0.24), 2: quota(0.17), 3: quota(0.16)}}
	pm := &policyMemo{}
	decideShards(three, st, p, pm, t0)
	d := decideShards(three, st, p, pm, t0.Add(time.Minute))
	if d.action != "" || !strings.Contains(d.verdict, "node 1 is saturated and no other node has room") {
		t.Fatalf("3 busy machines, 10k ops/s under the ops threshold: %+v", d)
	}
	if !strings.Contains(d.verdict, "CPU 96% of 0.25 cores") {
		t.Fatalf("the verdict does not show the CPU read: %q", d.verdict)
	}

	four := policyTable(2)
	four.Nodes = append(four.Nodes, placement.Node{ID: 4, RaftAddr: "r"})
	st.LeaderOps[4] = 0
	st.NodeCPU[4] = quota(0.01)
	pm = &policyMemo{}
	decideShards(four, st, p, pm, t0)
	d = decideShards(four, st, p, pm, t0.Add(10*time.Second))
	if d.action != "create" || !strings.Contains(d.reason, "node 1 is saturated") || !strings.Contains(d.reason, "node 4 has room") {
		t.Fatalf("an idle fourth machine: %+v", d)
	}

	// A node whose CPU is not known is no room.
	delete(st.NodeCPU, 4)
	pm = &policyMemo{}
	decideShards(four, st, p, pm, t0)
	if d := decideShards(four, st, p, pm, t0.Add(time.Minute)); d.action != "" {
		t.Fatalf("a node not heard from taken as room: %+v", d)
	}

	// A follower at its limit is not a saturated leader.
	st = &PolicyState{LeaderOps: map[uint64]float64{1: 100, 2: 0, 3: 0}, ShardOps: map[uint64]float64{2: 100},
		NodeCPU: map[uint64]cpuload.Reading{1: quota(0.05), 2: quota(0.25), 3: quota(0.02)}}
	pm = &policyMemo{}
	decideShards(three, st, p, pm, t0)
	if d := decideShards(three, st, p, pm, t0.Add(time.Minute)); d.action != "" || !strings.HasPrefix(d.verdict, "steady") {
		t.Fatalf("a busy follower: %+v", d)
	}
}

// A node leading a shard whose load the meta leader cannot read (it holds
// no replica of it) still counts as a leader: its CPU can saturate it.
func TestPolicyCountsLeadersOfUnreadShards(t *testing.T) {
	p := ShardPolicy{Auto: true, IdleOps: 5, Sustain: 10 * time.Second}.WithDefaults()
	t0 := time.Unix(1000, 0)
	quota := func(used float64) cpuload.Reading { return cpuload.Reading{Used: used, Capacity: 0.25} }
	tab := policyTable(2, 3)
	tab.Nodes = append(tab.Nodes, placement.Node{ID: 4, RaftAddr: "r"})
	st := &PolicyState{LeaderOps: map[uint64]float64{1: 3000, 2: 0, 3: 0, 4: 0}, ShardOps: map[uint64]float64{2: 3000},
		Leads:   map[uint64][]uint64{1: {2}, 3: {3}},
		NodeCPU: map[uint64]cpuload.Reading{1: quota(0.1), 2: quota(0.1), 3: quota(0.25), 4: quota(0.01)}}
	pm := &policyMemo{}
	decideShards(tab, st, p, pm, t0)
	d := decideShards(tab, st, p, pm, t0.Add(10*time.Second))
	if d.action != "create" || !strings.Contains(d.reason, "node 3 is saturated") {
		t.Fatalf("node 3 leads unread shard 3 at its CPU limit: %+v", d)
	}
}
