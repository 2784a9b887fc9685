package node_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand"
	"sync"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/wardenlock/warden/client"
	"github.com/wardenlock/warden/control"
	"github.com/wardenlock/warden/internal/linmodel"
	"github.com/wardenlock/warden/node"
	"github.com/wardenlock/warden/node/nodetest"
	"github.com/wardenlock/warden/placement"
	"github.com/wardenlock/warden/wire"
)

// moveWorkload runs try-acquire / release / read / keepalive traffic from
// several clients on a few namespaces and records every operation for the
// lock-register model (internal/linmodel/model.go).
type moveWorkload struct {
	hist  *linmodel.History
	paths []string
	start time.Time
	ops   int
	mu    sync.Mutex
}

func newMoveWorkload(namespaces int) *moveWorkload {
	w := &moveWorkload{start: time.Now()}
	w.hist = linmodel.NewHistory(func() int64 { return int64(time.Since(w.start)) })
	for i := 0; i < namespaces; i++ {
		ns := fmt.Sprintf("/mv/n%d", i)
		w.paths = append(w.paths, ns, ns+"/a", ns+"/a/b", ns+"/c")
	}
	return w
}

func (w *moveWorkload) run(ctx context.Context, t *testing.T, id int, cl *client.Client) {
	rng := rand.New(rand.NewSource(int64(id)))
	lease := uint64(rng.Int63()) | 1
	owner := fmt.Sprintf("c%d", id)
	held := map[string]uint64{}
	do := func(in linmodel.RegInput, req *wire.Request) linmodel.RegOutput {
		octx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 20*time.Second)
		defer cancel()
		call := w.hist.Call()
		resp, _ := cl.Do(octx, req)
		var out linmodel.RegOutput
		switch {
		case resp == nil, resp.Code == wire.Ambiguous, resp.Code.Retryable(), resp.Code == wire.Timeout:
			out.Unknown = true
		default:
			out.Code = resp.Code
			switch in.Kind {
			case linmodel.RegAcquire, linmodel.RegRelease:
				out.Token, out.Count = resp.Token, resp.Count
			case linmodel.RegRead:
				for _, h := range resp.Holders {
					if h.Path == "" || h.Path == in.Path {
						out.Holder = &linmodel.RegHold{Lease: h.Lease, Owner: h.Owner, Token: h.Token, Count: h.Count}
					}
				}
			case linmodel.RegKeepAlive:
				for _, l := range resp.Leases {
					out.Gone = out.Gone || l == in.Lease
				}
				if resp.Code != wire.OK && !out.Gone {
					out.Unknown = true
				}
			}
		}
		w.hist.Add(id, in, call, out)
		w.mu.Lock()
		w.ops++
		w.mu.Unlock()
		return out
	}
	for ctx.Err() == nil {
		p := w.paths[rng.Intn(len(w.paths))]
		switch x := rng.Intn(100); {
		case x < 40:
			in := linmodel.RegInput{Kind: linmodel.RegAcquire, Path: p, Lease: lease, Owner: owner}
			out := do(in, &wire.Request{Op: wire.OpAcquire, Path: p, Lease: lease, Owner: owner, TTL: 600_000})
			if !out.Unknown && out.Code == wire.OK {
				held[p] = out.Token
			}
		case x < 65:
			for hp, tok := range held {
				in := linmodel.RegInput{Kind: linmodel.RegRelease, Path: hp, Token: tok, Lease: lease, Owner: owner}
				do(in, &wire.Request{Op: wire.OpRelease, Path: hp, Token: tok, Lease: lease, Owner: owner})
				delete(held, hp)
				break
			}
		case x < 90:
			do(linmodel.RegInput{Kind: linmodel.RegRead, Path: p}, &wire.Request{Op: wire.OpLockInfo, Path: p})
		default:
			do(linmodel.RegInput{Kind: linmodel.RegKeepAlive, Lease: lease},
				&wire.Request{Op: wire.OpKeepAlive, Lease: lease, TTL: 600_000})
		}
		time.Sleep(time.Duration(rng.Intn(5)) * time.Millisecond)
	}
}

func (w *moveWorkload) check(t *testing.T) {
	t.Helper()
	ops := w.hist.Ops()
	res, info := porcupine.CheckOperationsVerbose(linmodel.RegisterModel(), ops, 60*time.Second)
	if res != porcupine.Ok {
		if res == porcupine.Illegal {
			path := t.TempDir() + "/history.html"
			if err := porcupine.VisualizePath(linmodel.RegisterModel(), info, path); err == nil {
				t.Logf("visualisation: %s", path)
			}
		}
		t.Fatalf("history of %d operations is not linearizable: %v", len(ops), res)
	}
	t.Logf("%d operations, linearizable", len(ops))
}

// waitMoves waits until no move is in flight.
func waitMoves(t *testing.T, cl *client.Client) []client.RangeRow {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		rows, err := cl.RangeList(ctx)
		cancel()
		busy := err != nil
		for _, r := range rows {
			busy = busy || r.Moving != ""
		}
		if !busy {
			return rows
		}
		if time.Now().After(deadline) {
			t.Fatalf("moves still in flight: %+v (%v)", rows, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// waitRange waits until the table the admin client sees has a range
// starting at key and no move in flight.
func waitRange(t *testing.T, cl *client.Client, key string) []client.RangeRow {
	t.Helper()
	for i := 0; i < 300; i++ {
		rows := waitMoves(t, cl)
		if otherShard(rows, key) != 0 {
			return rows
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("no range starts at %x", key)
	return nil
}

// waitOn waits until the range starting at key is on shard and no move is
// in flight (as the node answering the admin client sees it).
func waitOn(t *testing.T, cl *client.Client, key string, shard uint64) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		rows := waitMoves(t, cl)
		for _, r := range rows {
			if r.Start == key && r.Shard == shard {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("the range at %x never reached shard %d: %+v", key, shard, rows)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func otherShard(rows []client.RangeRow, start string) uint64 {
	for _, r := range rows {
		if r.Start == start {
			if r.Shard == 2 {
				return 3
			}
			return 2
		}
	}
	return 0
}

// TestRangeSplitMoveMergeUnderTraffic splits ranges at namespaces, moves
// them between shards and merges them back while clients lock, release and
// read; the history must be linearizable (no double grant, tokens only go
// up, acknowledged grants and releases visible afterwards).
func TestRangeSplitMoveMergeUnderTraffic(t *testing.T) {
	c := nodetest.Start(t, nodetest.Options{Nodes: 3, Shards: 2})
	admin := newClient(t, c)
	tr := startTraffic(t, c, 4)
	w := tr.w
	actx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	moved := moveRounds(t, actx, admin, 4)
	// Merge every pair of neighbours that share a shard.
	merged := 0
	for again := true; again; {
		again = false
		rows := waitMoves(t, admin)
		for i := 0; i+1 < len(rows); i++ {
			if rows[i].Shard == rows[i+1].Shard {
				if err := admin.MergeRange(actx, rows[i].Start); err != nil {
					t.Fatalf("merge: %v", err)
				}
				merged++
				again = true
				break
			}
		}
	}
	tr.finish()
	if moved == 0 || w.ops < 200 {
		t.Fatalf("too little happened: %d moves, %d ops", moved, w.ops)
	}
	t.Logf("%d moves, %d merges, %d ops", moved, merged, w.ops)
	w.check(t)
}

// traffic is a move workload's clients, running until finish.
type traffic struct {
	w    *moveWorkload
	stop context.CancelFunc
	wg   sync.WaitGroup
}

// startTraffic starts n clients of a move workload on c.
func startTraffic(t *testing.T, c *nodetest.Cluster, n int) *traffic {
	ctx, stop := context.WithCancel(context.Background())
	tr := &traffic{w: newMoveWorkload(n), stop: stop}
	for i := 0; i < n; i++ {
		cl := newClient(t, c)
		tr.wg.Add(1)
		go func(id int) { defer tr.wg.Done(); tr.w.run(ctx, t, id, cl) }(i)
	}
	return tr
}

// finish lets the traffic run on the final layout for a moment, then stops it.
func (tr *traffic) finish() {
	time.Sleep(500 * time.Millisecond)
	tr.stop()
	tr.wg.Wait()
}

// moveRounds splits the namespaces /mv/n0 … off into ranges of their own
// and moves each to the other shard, one after another; it returns how
// many moved.
func moveRounds(t *testing.T, ctx context.Context, admin *client.Client, rounds int) int {
	t.Helper()
	moved := 0
	for round := 0; round < rounds; round++ {
		ns := fmt.Sprintf("/mv/n%d", round)
		if err := admin.SplitRange(ctx, ns); err != nil && !errors.Is(err, wire.ErrInvalidArgument) {
			t.Fatalf("split at %s: %v", ns, err)
		}
		key := wire.RouteKey(ns)
		rows := waitRange(t, admin, key)
		to := otherShard(rows, key)
		if _, err := admin.MoveRange(ctx, key, to); err != nil {
			t.Fatalf("move the range of %s to shard %d: %v", ns, to, err)
		}
		waitOn(t, admin, key, to)
		moved++
		time.Sleep(300 * time.Millisecond) // traffic on the new layout
	}
	return moved
}

// TestRangeMoveSurvivesDriverCrash stops the node driving a move right
// after each step of the sequence; the next meta leader must finish the
// move, and the lock held in the range, the waiter queued behind it and the
// fence must all come through.
func TestRangeMoveSurvivesDriverCrash(t *testing.T) {
	steps := []placement.RangeStep{placement.RangeFrozen, placement.RangeInstalled, placement.RangeSwitched, shardStepDropped}
	for _, step := range steps {
		t.Run(step.String(), func(t *testing.T) { moveWithCrash(t, step) })
	}
}

func moveWithCrash(t *testing.T, crashAfter placement.RangeStep) {
	var once sync.Once
	crashed := make(chan uint64, 1)
	c := nodetest.Start(t, nodetest.Options{Nodes: 3, Shards: 2, Edit: func(cfg *node.Config) {
		id := cfg.ID
		cfg.MoveHook = func(_ uint64, step placement.RangeStep, stopc <-chan struct{}) {
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
	admin := newClient(t, c)
	holder := newClient(t, c)
	// The waiter's wait goes through the node that will drive the move
	// (the meta leader), so a crash of the driver is also the death of
	// the node its client is connected to.
	driver := metaLeader(t, c)
	waiterCl := clientVia(t, c, driver)
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()

	const path = "/mv/crash/job"
	// Short TTLs: the sessions must be kept alive on the destination by
	// the same keepalives, or they expire while the test waits below.
	s1, err := holder.NewSession(ctx, client.WithTTL(3*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	m1 := client.NewMutex(s1, path)
	if err := m1.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	tok1 := m1.Token()
	s2, err := waiterCl.NewSession(ctx, client.WithTTL(3*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	m2 := client.NewMutex(s2, path)
	got := make(chan error, 1)
	go func() { got <- m2.Lock(ctx) }()
	waitQueued(t, admin, path)

	ns := wire.Namespace(path, 2)
	if err := admin.SplitRange(ctx, ns); err != nil && !errors.Is(err, wire.ErrInvalidArgument) {
		t.Fatal(err)
	}
	key := wire.RouteKey(ns)
	rows := waitRange(t, admin, key)
	to := otherShard(rows, key)
	if _, err := admin.MoveRange(ctx, key, to); err != nil {
		t.Fatal(err)
	}
	if crashAfter != noCrash {
		var victim uint64
		select {
		case victim = <-crashed:
		case <-ctx.Done():
			t.Fatal("the driver never reached the step")
		}
		if int(victim-1) != driver {
			t.Fatalf("the move was driven by node %d, not by node %d (the meta leader when the wait was made)", victim, driver+1)
		}
		c.StopNode(int(victim - 1))
		t.Logf("stopped node %d, the driver and the waiter's node, after step %v", victim, crashAfter)
	}

	waitOn(t, admin, key, to)
	time.Sleep(4500 * time.Millisecond) // longer than the TTL
	// The lock moved with its holder, the session is still alive, and a
	// release hands it to the waiter that was queued before the move.
	info, err := admin.LockInfo(ctx, path)
	if err != nil || len(info.Holders) != 1 || info.Holders[0].Token != tok1 {
		t.Fatalf("lock after the move: %+v %v (want token %d)", info, err, tok1)
	}
	if err := m1.Unlock(ctx); err != nil {
		t.Fatalf("release after the move: %v", err)
	}
	// The destination hands the lock to the waiter that queued on the
	// source before the move, with a higher token.
	var granted wire.Holder
	for i := 0; granted.Token == 0; i++ {
		info, err := admin.LockInfo(ctx, path)
		if err == nil && len(info.Holders) == 1 && info.Holders[0].Lease == s2.Lease() {
			granted = info.Holders[0]
		} else if i > 300 {
			t.Fatalf("the queued waiter was never granted: %+v %v", info, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if granted.Token <= tok1 {
		t.Fatalf("token went backwards across the move: %d after %d", granted.Token, tok1)
	}
	// Its client learns of the grant, also when the node its wait went
	// through died with the driver: the re-sent wait is answered with the
	// grant made on the destination.
	select {
	case err := <-got:
		if err != nil {
			t.Fatalf("queued waiter: %v", err)
		}
	case <-ctx.Done():
		t.Fatal("the waiter's client never heard of its grant")
	}
	if m2.Token() != granted.Token {
		t.Fatalf("client token %d, server token %d", m2.Token(), granted.Token)
	}
	if err := m2.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
}

const (
	shardStepDropped = placement.RangeStep(4)
	noCrash          = placement.RangeStep(99)
)

// TestRangeMoveHandsQueuedWaiterOver: a lock held and a wait queued on the
// source; after the move the release on the destination grants the wait,
// and the waiting client hears of it.
func TestRangeMoveHandsQueuedWaiterOver(t *testing.T) { moveWithCrash(t, noCrash) }

// metaLeader returns the index of the node leading the meta group.
func metaLeader(t *testing.T, c *nodetest.Cluster) int {
	t.Helper()
	for _, n := range c.Nodes {
		if n != nil {
			if id := n.Host.Leader(placement.MetaShard); id != 0 {
				return int(id - 1)
			}
		}
	}
	t.Fatal("the meta group has no leader")
	return -1
}

// clientVia returns a client with one pooled connection, to node i first
// (it fails over to the others in order).
func clientVia(t *testing.T, c *nodetest.Cluster, i int) *client.Client {
	t.Helper()
	eps := c.AllEndpoints()
	eps = append(eps[i:], eps[:i]...)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cl, err := client.New(ctx, eps, client.WithRequestTimeout(15*time.Second), client.WithPoolSize(1))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cl.Close() })
	return cl
}

func waitQueued(t *testing.T, cl *client.Client, path string) {
	t.Helper()
	for i := 0; i < 200; i++ {
		info, err := cl.LockInfo(context.Background(), path)
		if err == nil && len(info.Waiters) > 0 {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatal("the waiter never queued")
}

// TestPlacementLoopSplitsHotRanges turns on automatic splitting with a low
// threshold: the meta leader's placement loop must split a busy range (at a
// namespace boundary) while a lock held in it stays held.
func TestPlacementLoopSplitsHotRanges(t *testing.T) {
	c := nodetest.Start(t, nodetest.Options{Nodes: 3, Shards: 2, Edit: func(cfg *node.Config) {
		cfg.Ranges = control.RangePolicy{AutoSplit: true, SplitOpsPerSec: 20, Every: time.Second}
	}})
	cl := newClient(t, c)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	s, err := cl.NewSession(ctx)
	if err != nil {
		t.Fatal(err)
	}
	m := client.NewMutex(s, "/hot/keep")
	if err := m.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	for i := 0; ; i++ {
		k := client.NewMutex(s, fmt.Sprintf("/hot/n%d/x", i%50))
		if err := k.Lock(ctx); err != nil {
			t.Fatal(err)
		}
		if err := k.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		if i%50 == 0 {
			rows, err := cl.RangeList(ctx)
			if err == nil && len(rows) > 2 {
				t.Logf("%d ranges after %d lock/unlock pairs", len(rows), i)
				break
			}
		}
	}
	info, err := cl.LockInfo(ctx, "/hot/keep")
	if err != nil || len(info.Holders) != 1 || info.Holders[0].Token != m.Token() {
		t.Fatalf("the lock held across the splits: %+v %v", info, err)
	}
}

// TestRangeMoveDrivenWithoutReplicas: on 5 nodes with 3 replicas per data
// shard (shard 2 on nodes 1-3, shard 3 on nodes 2-4), the meta leader, and
// so the move driver, is node 5, which holds no replica of either shard: it
// freezes, exports, installs and drops through peer connections. Ranges
// are split and moved back and forth under traffic from four clients; the
// history must be linearizable.
func TestRangeMoveDrivenWithoutReplicas(t *testing.T) {
	var mu sync.Mutex
	drivers := map[uint64]int{} // node → steps it drove
	c := nodetest.Start(t, nodetest.Options{Nodes: 5, Shards: 2, Edit: func(cfg *node.Config) {
		cfg.Replicas = 3
		id := cfg.ID
		cfg.MoveHook = func(uint64, placement.RangeStep, <-chan struct{}) {
			mu.Lock()
			drivers[id]++
			mu.Unlock()
		}
	}})
	for _, id := range []uint64{2, 3} {
		if _, ok := c.Nodes[4].Host.Shard(id); ok {
			t.Fatalf("node 5 holds a replica of shard %d; the layout this test needs changed", id)
		}
	}
	c.WaitFor(30*time.Second, "node 5 leads the meta group", func() error {
		lead := metaLeader(t, c)
		if lead == 4 {
			return nil
		}
		c.Nodes[lead].Host.TransferLeader(placement.MetaShard, 5)
		return fmt.Errorf("node %d leads the meta group", lead+1)
	})

	admin := newClient(t, c)
	tr := startTraffic(t, c, 4)
	w := tr.w
	actx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	moved := moveRounds(t, actx, admin, 3)
	tr.finish()
	mu.Lock()
	defer mu.Unlock()
	if drivers[5] == 0 || len(drivers) != 1 {
		t.Fatalf("steps driven per node: %v; want every step driven by node 5, which has no replica of either shard", drivers)
	}
	if w.ops < 200 {
		t.Fatalf("too little traffic: %d ops", w.ops)
	}
	t.Logf("%d moves driven by node 5 (%d steps), %d ops", moved, drivers[5], w.ops)
	w.check(t)
}
