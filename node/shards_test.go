package node_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/wardenlock/warden/client"
	"github.com/wardenlock/warden/control"
	"github.com/wardenlock/warden/internal/cpuload"
	"github.com/wardenlock/warden/node"
	"github.com/wardenlock/warden/node/nodetest"
	"github.com/wardenlock/warden/placement"
)

// tableOf reads the meta group's table through the first running node.
func tableOf(t *testing.T, c *nodetest.Cluster) *placement.Table {
	t.Helper()
	for _, n := range c.Nodes {
		if n == nil {
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		tab, err := n.Host.RefreshTable(ctx)
		cancel()
		if err == nil && tab != nil {
			return tab
		}
	}
	return nil
}

// waitShardState waits until shard id is in state want (active, creating,
// retiring in Shards; stopping, retired in Retired), and, for active,
// until it no longer fills and no range move is in flight.
func waitShardState(t *testing.T, c *nodetest.Cluster, id uint64, want placement.ShardState, within time.Duration) *placement.Table {
	t.Helper()
	var last string
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) {
		tab := tableOf(t, c)
		if tab != nil {
			if si, ok := tab.Shard(id); ok {
				last = fmt.Sprintf("%v fill=%v moves=%d", si.State, si.Fill, len(tab.RangeMoves))
				if si.State == want && (want != placement.ShardActive || !si.Fill && len(tab.RangeMoves) == 0) {
					return tab
				}
			} else if rs, ok := tab.RetiredOf(id); ok {
				last = fmt.Sprintf("%v pending=%v", rs.State(), rs.Pending)
				if rs.State() == want {
					return tab
				}
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("shard %d never reached %v (last: %s)", id, want, last)
	return nil
}

// runningMetaLeader waits until a running node leads the meta group and
// returns its index.
func runningMetaLeader(t *testing.T, c *nodetest.Cluster) int {
	t.Helper()
	lead := -1
	c.WaitFor(30*time.Second, "a running node leads the meta group", func() error {
		for i, n := range c.Nodes {
			if n != nil && n.Host.Leader(placement.MetaShard) == uint64(i+1) {
				lead = i
				return nil
			}
		}
		return fmt.Errorf("no running meta leader")
	})
	return lead
}

// noReplicaOf checks that no running node hosts a replica of shard id.
func noReplicaOf(t *testing.T, c *nodetest.Cluster, id uint64) {
	t.Helper()
	for i, n := range c.Nodes {
		if n == nil {
			continue
		}
		if _, ok := n.Host.Shard(id); ok {
			t.Fatalf("node %d still hosts a replica of retired shard %d", i+1, id)
		}
	}
}

// TestShardAddAndRetireUnderTraffic starts with one data shard, adds one
// while four clients lock, release, read and keep alive (the new shard
// takes half the key space through range moves), then retires the
// original shard (its ranges move to the new one, its replicas stop and
// their data goes). The history must be linearizable: no double grant,
// tokens only go up across both moves, acknowledged operations survive.
func TestShardAddAndRetireUnderTraffic(t *testing.T) {
	c := nodetest.Start(t, nodetest.Options{Nodes: 3, Shards: 1})
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	// A session with a short TTL holds a lock throughout: its keepalives
	// must be acknowledged while shards appear and go.
	holder := newClient(t, c)
	s1, err := holder.NewSession(ctx, client.WithTTL(3*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	m1 := client.NewMutex(s1, "/life/held/job")
	if err := m1.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	tr := startTraffic(t, c, 4)
	time.Sleep(500 * time.Millisecond)
	h := c.Nodes[0].Host
	id, err := h.CreateShard(ctx, nil, true, "test")
	if err != nil {
		t.Fatal(err)
	}
	if id != 3 {
		t.Fatalf("the new shard got id %d, want 3", id)
	}
	tab := waitShardState(t, c, id, placement.ShardActive, 60*time.Second)
	if n := len(tab.RangesOf(id)); n == 0 {
		t.Fatalf("the new shard holds no range: %+v", tab.Ranges)
	}
	time.Sleep(time.Second) // traffic on both shards
	if err := h.RetireShard(ctx, 2, "test"); err != nil {
		t.Fatal(err)
	}
	tab = waitShardState(t, c, 2, placement.ShardRetired, 60*time.Second)
	if len(tab.RangesOf(2)) != 0 || len(tab.RangesOf(id)) != len(tab.Ranges) {
		t.Fatalf("after retiring shard 2: %+v", tab.Ranges)
	}
	noReplicaOf(t, c, 2)
	time.Sleep(4 * time.Second) // longer than the TTL, on the final layout
	info, err := holder.LockInfo(ctx, "/life/held/job")
	if err != nil || len(info.Holders) != 1 || info.Holders[0].Token != m1.Token() || info.Holders[0].Lease != s1.Lease() {
		t.Fatalf("the lock held across the shard changes: %+v %v", info, err)
	}
	if err := m1.Unlock(ctx); err != nil {
		t.Fatalf("the session did not survive the shard changes: %v", err)
	}
	tr.finish()
	if tr.w.ops < 200 {
		t.Fatalf("too little traffic: %d ops", tr.w.ops)
	}
	tr.w.check(t)
}

// TestShardLifecycleSurvivesCrash creates shard 3 on a one-shard cluster
// and retires shard 2 (its ranges move to shard 3) under lock traffic,
// stopping the node that recorded one lifecycle step right after it
// (the meta leader driving it, or the node that removed its replica), and
// starting it again later. The lifecycle must resume and finish on the
// other nodes (the restarted node removes its stopped replica), a lock held
// throughout keeps its holder and token, a new grant's token is above it,
// and the history must be linearizable.
func TestShardLifecycleSurvivesCrash(t *testing.T) {
	for _, step := range []string{control.ShardStepCreated, control.ShardStepActivated, control.ShardStepFilled,
		control.ShardStepRetiring, control.ShardStepEmptied, control.ShardStepRemoved} {
		t.Run(step, func(t *testing.T) { lifecycleWithCrash(t, step) })
	}
}

func lifecycleWithCrash(t *testing.T, crashAfter string) {
	var once sync.Once
	crashed := make(chan uint64, 1)
	c := nodetest.Start(t, nodetest.Options{Nodes: 3, Shards: 1, Edit: func(cfg *node.Config) {
		id := cfg.ID
		cfg.ShardHook = func(_ uint64, step string, stopc <-chan struct{}) {
			if step != crashAfter {
				return
			}
			hit := false
			once.Do(func() { hit = true })
			if !hit {
				return
			}
			crashed <- id
			<-stopc // hold the driver here until the node is stopped
		}
	}})
	ctx, cancel := context.WithTimeout(context.Background(), 180*time.Second)
	defer cancel()
	holder := newClient(t, c)
	// The session rides out a stopped node with the meta group's and up to
	// two shards' elections on a loaded machine: a TTL of a few seconds is
	// too tight for that (TestShardAddAndRetireUnderTraffic checks short
	// TTLs across a retirement without a crash).
	s1, err := holder.NewSession(ctx, client.WithTTL(15*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	const path = "/life/crash/job"
	m1 := client.NewMutex(s1, path)
	if err := m1.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	tok1 := m1.Token()
	tr := startTraffic(t, c, 3)

	victim := make(chan int, 1)
	go func() {
		select {
		case id := <-crashed:
			c.StopNode(int(id - 1))
			t.Logf("stopped node %d after step %s", id, crashAfter)
			victim <- int(id - 1)
		case <-ctx.Done():
		}
	}()
	// The steps are recorded by the meta leader (create and retire are
	// asked of it too, so one node drives the whole lifecycle).
	lead := metaLeader(t, c)
	created := make(chan error, 1)
	go func() {
		_, err := c.Nodes[lead].Host.CreateShard(ctx, nil, true, "test")
		created <- err
	}()
	if err := <-created; err != nil && crashAfter != control.ShardStepCreated {
		t.Fatal(err)
	}
	waitShardState(t, c, 3, placement.ShardActive, 90*time.Second)
	for {
		lead = metaLeader(t, c)
		if c.Nodes[lead] == nil {
			time.Sleep(100 * time.Millisecond)
			continue
		}
		go func(h *control.Host) { _ = h.RetireShard(ctx, 2, "test") }(c.Nodes[lead].Host)
		break
	}
	tab := waitShardState(t, c, 2, placement.ShardStopping, 90*time.Second)
	if len(tab.RangesOf(3)) != len(tab.Ranges) {
		t.Fatalf("after shard 2 stopped, shard 3 holds %d of %d ranges", len(tab.RangesOf(3)), len(tab.Ranges))
	}
	var dead int
	select {
	case dead = <-victim:
	case <-ctx.Done():
		t.Fatalf("no node ever recorded step %s", crashAfter)
	}
	c.StartNode(dead)
	waitShardState(t, c, 2, placement.ShardRetired, 90*time.Second)
	c.WaitFor(30*time.Second, "every replica of shard 2 removed", func() error {
		for i, n := range c.Nodes {
			if _, ok := n.Host.Shard(2); ok {
				return fmt.Errorf("node %d still hosts shard 2", i+1)
			}
		}
		return nil
	})
	tr.finish()

	// The held lock came through both moves with its holder and token.
	admin := newClient(t, c)
	info, err := admin.LockInfo(ctx, path)
	if err != nil || len(info.Holders) != 1 || info.Holders[0].Token != tok1 || info.Holders[0].Lease != s1.Lease() {
		t.Fatalf("lock after the lifecycle: %+v %v (want token %d of lease %x)", info, err, tok1, s1.Lease())
	}
	if err := m1.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	l, err := admin.Acquire(ctx, path, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if l.Token() <= tok1 {
		t.Fatalf("token went back: %d after %d", l.Token(), tok1)
	}
	if tr.w.ops < 100 {
		t.Fatalf("too little traffic: %d ops", tr.w.ops)
	}
	tr.w.check(t)
}

// TestShardCreationRollsBack: a shard created on a stopped node never gets
// a leader; past the create timeout the meta leader rolls the creation
// back (recorded with its reason), and once the node is back it records
// that it holds no replica, so the shard ends retired. Its id is not used
// again.
func TestShardCreationRollsBack(t *testing.T) {
	c := nodetest.Start(t, nodetest.Options{Nodes: 3, Shards: 1, Edit: func(cfg *node.Config) {
		cfg.CreateTimeout = 2 * time.Second
	}})
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	c.StopNode(2)
	lead := runningMetaLeader(t, c)
	id, err := c.Nodes[lead].Host.CreateShard(ctx, []uint64{3}, true, "test")
	if err != nil {
		t.Fatal(err)
	}
	tab := waitShardState(t, c, id, placement.ShardStopping, 60*time.Second)
	last := tab.Decisions[len(tab.Decisions)-1]
	if last.Action != "retire" || last.Shard != id || !strings.Contains(last.Reason, "no leader after") {
		t.Fatalf("last decision: %+v", last)
	}
	c.StartNode(2)
	waitShardState(t, c, id, placement.ShardRetired, 60*time.Second)
	noReplicaOf(t, c, id)
	next, err := c.Nodes[lead].Host.CreateShard(ctx, nil, false, "test")
	if err != nil || next != id+1 {
		t.Fatalf("next shard: %d %v, want %d", next, err, id+1)
	}
	waitShardState(t, c, next, placement.ShardActive, 60*time.Second)
}

// TestShardPolicyFollowsLoad runs the automatic policy with low thresholds:
// lock traffic saturates the one shard's leader, so the meta leader adds a
// shard (and fills it); once the traffic stops, both shards are idle and
// it retires one, down to its minimum of one. Both decisions are recorded
// with the policy's reasons, and the policy's reading says it is steady.
// Each node's CPU (here a fixed reading per node) reaches the policy's
// reading through the nodes' statuses.
func TestShardPolicyFollowsLoad(t *testing.T) {
	c := nodetest.Start(t, nodetest.Options{Nodes: 3, Shards: 1, Edit: func(cfg *node.Config) {
		cfg.ShardPolicy = control.ShardPolicy{Auto: true, SaturatedOps: 100, IdleOps: 5, Sustain: time.Second,
			IdleFor: 3 * time.Second, Cooldown: 2 * time.Second, Every: 500 * time.Millisecond, MaxShards: 2}
		used := 0.1 * float64(cfg.ID)
		cfg.CPU = func() cpuload.Reading { return cpuload.Reading{Used: used, Capacity: 1} }
	}})
	tr := startTraffic(t, c, 4)
	c.WaitFor(60*time.Second, "the policy adds a shard", func() error {
		tab := tableOf(t, c)
		if tab == nil || len(tab.ActiveShards()) < 2 {
			return fmt.Errorf("not yet")
		}
		return nil
	})
	tr.finish()
	// Every node shows the policy's reading (the meta leader's), with every
	// node's CPU.
	for i := range c.Nodes {
		c.WaitFor(20*time.Second, "the policy's reading through every node", func() error {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			log, err := clientVia(t, c, i).ShardLog(ctx)
			if err != nil || log.Policy == nil || !log.Policy.Enabled || log.Policy.Verdict == "" {
				return fmt.Errorf("shard log through node %d: %+v %v", i+1, log, err)
			}
			for n := 1; n <= len(c.Nodes); n++ {
				if got := log.Policy.NodeCPU[strconv.Itoa(n)]; got != (client.NodeCPU{Used: 0.1 * float64(n), Capacity: 1}) {
					return fmt.Errorf("node %d's CPU in the policy's reading: %+v", n, log.Policy.NodeCPU)
				}
			}
			if !strings.Contains(log.Policy.Verdict, "CPU 30% of 1 cores") {
				return fmt.Errorf("verdict %q does not show node 3's CPU", log.Policy.Verdict)
			}
			return nil
		})
	}
	c.WaitFor(60*time.Second, "the policy retires a shard", func() error {
		tab := tableOf(t, c)
		if tab == nil || len(tab.ActiveShards()) != 1 || len(tab.Shards) != 1 {
			return fmt.Errorf("shards: %+v", tab.Shards)
		}
		for _, r := range tab.Retired {
			if r.State() != placement.ShardRetired {
				return fmt.Errorf("shard %d is %v", r.ID, r.State())
			}
		}
		return nil
	})
	tab := tableOf(t, c)
	var got []string
	for _, d := range tab.Decisions {
		if (d.Action == "create" || d.Action == "retire") && strings.HasPrefix(d.Reason, "policy: ") {
			got = append(got, d.Action)
		}
	}
	if strings.Join(got, ",") != "create,retire" {
		t.Fatalf("policy decisions %v in %+v", got, tab.Decisions)
	}
	tr.w.check(t)
}

// TestShardCreatedWhileNodeDown: a shard created on nodes 1-3 while node 3
// is stopped becomes active on the other two; when node 3 comes back it
// starts its replica, which catches up and holds the shard's state.
func TestShardCreatedWhileNodeDown(t *testing.T) {
	c := nodetest.Start(t, nodetest.Options{Nodes: 3, Shards: 1})
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	c.StopNode(2)
	lead := runningMetaLeader(t, c)
	id, err := c.Nodes[lead].Host.CreateShard(ctx, []uint64{1, 2, 3}, true, "test")
	if err != nil {
		t.Fatal(err)
	}
	waitShardState(t, c, id, placement.ShardActive, 60*time.Second)
	cl := newClient(t, c)
	var onNew string
	for i := 0; onNew == ""; i++ {
		p := fmt.Sprintf("/down/n%d/k", i)
		tab := tableOf(t, c)
		if r, err := tab.Locate(p); err == nil && r.Shard == id {
			onNew = p
		}
	}
	if _, err := cl.Put(ctx, onNew, []byte("v")); err != nil {
		t.Fatal(err)
	}
	c.StartNode(2)
	c.WaitFor(60*time.Second, "node 3 runs its replica of the new shard, caught up", func() error {
		s, ok := c.Nodes[2].Host.Shard(id)
		if !ok {
			return fmt.Errorf("node 3 has no replica of shard %d", id)
		}
		lead := c.LeaderOf(id)
		if lead < 0 {
			return fmt.Errorf("shard %d has no leader", id)
		}
		ls, _ := c.Nodes[lead].Host.Shard(id)
		if s.AppliedIndex() < ls.AppliedIndex() {
			return fmt.Errorf("node 3 applied %d of %d", s.AppliedIndex(), ls.AppliedIndex())
		}
		return nil
	})
}
