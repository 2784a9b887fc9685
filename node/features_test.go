package node_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/wardenlock/warden/client"
	"github.com/wardenlock/warden/fence"
	"github.com/wardenlock/warden/node/nodetest"
	"github.com/wardenlock/warden/wire"
)

// Semaphores, multi-locks, revocation, lock-delay, priorities, hand-over
// and deadlock detection over one real 3-node cluster (2 data shards):
// each subtest goes through the client, the router, Raft and the state
// machine, with the leader's deadline timer driving revocations and
// lock-delays.
func TestFeatures(t *testing.T) {
	c := nodetest.Start(t, nodetest.Options{})
	cl := newClient(t, c)
	t.Run("Semaphore", func(t *testing.T) { testSemaphore(t, cl) })
	t.Run("MultiLockAcrossShards", func(t *testing.T) { testMultiLock(t, cl) })
	t.Run("MultiLockersNeverDeadlock", func(t *testing.T) { testMultiLockers(t, cl) })
	t.Run("LockDelayAfterExpiry", func(t *testing.T) { testLockDelay(t, cl) })
	t.Run("RevocationWithDeadline", func(t *testing.T) { testRevocation(t, cl) })
	t.Run("PriorityAndHandOver", func(t *testing.T) { testHandOver(t, cl) })
	t.Run("Deadlock", func(t *testing.T) { testDeadlock(t, cl) })
	t.Run("ExactlyOnceRetry", func(t *testing.T) { testExactlyOnce(t, c, cl) })
}

// eventually polls cond until it holds or ctx ends (no timing assertion:
// only the outcome is checked).
func eventually(t *testing.T, ctx context.Context, what string, cond func() bool) {
	t.Helper()
	for !cond() {
		select {
		case <-ctx.Done():
			t.Fatalf("%s: never happened", what)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

func waiters(ctx context.Context, cl *client.Client, path string) int {
	info, err := cl.LockInfo(ctx, path)
	if err != nil {
		return 0
	}
	return len(info.Waiters)
}

func testSemaphore(t *testing.T, cl *client.Client) {
	ctx := ctxT(t, 60*time.Second)
	s := session(t, cl, 10*time.Second)
	sem := client.NewSemaphore(s, "/sem/ns/pool", 2)
	p1, err := sem.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	p2, err := sem.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if p1.Token() == p2.Token() {
		t.Fatal("two permits share a token")
	}
	if _, err := sem.TryAcquire(ctx); !errors.Is(err, client.ErrConflict) {
		t.Fatalf("third permit of two: %v, want ErrConflict", err)
	}
	// An exclusive lock on the parent conflicts with the permits.
	parent, err := cl.Acquire(ctx, "/sem/ns", 5*time.Second, client.WithTry())
	if !errors.Is(err, client.ErrConflict) {
		t.Fatalf("parent lock while permits are out: %v (%v)", err, parent)
	}
	third := make(chan *client.Permit, 1)
	go func() {
		p, err := sem.Acquire(ctx)
		if err != nil {
			t.Error(err)
		}
		third <- p
	}()
	eventually(t, ctx, "third permit queued", func() bool { return waiters(ctx, cl, "/sem/ns/pool") == 1 })
	if info, _ := cl.LockInfo(ctx, "/sem/ns/pool"); info.Permits != 2 || len(info.Holders) != 2 {
		t.Fatalf("lockinfo: %d permits, %d holders", info.Permits, len(info.Holders))
	}
	if err := p1.Release(ctx); err != nil {
		t.Fatal(err)
	}
	p3 := <-third
	if p3 == nil || p3.Token() <= p2.Token() {
		t.Fatal("the queued permit was not granted a fresh token")
	}
	for _, p := range []*client.Permit{p2, p3} {
		if err := p.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
}

func shardsOf(t *testing.T, ctx context.Context, cl *client.Client, paths []string) map[uint64]bool {
	ranges, err := cl.Ranges(ctx)
	if err != nil {
		t.Fatal(err)
	}
	table := &wire.RouteTable{Depth: 2, Ranges: ranges}
	out := map[uint64]bool{}
	for _, p := range paths {
		sh, ok := table.Locate(p)
		if !ok {
			t.Fatalf("%s is not located", p)
		}
		out[sh] = true
	}
	return out
}

func testMultiLock(t *testing.T, cl *client.Client) {
	ctx := ctxT(t, 60*time.Second)
	s := session(t, cl, 10*time.Second)
	var paths []string
	for i := 0; i < 8; i++ {
		paths = append(paths, fmt.Sprintf("/ml%d/res", i))
	}
	if len(shardsOf(t, ctx, cl, paths)) < 2 {
		t.Fatal("the paths all live on one shard: the test would not cross shards")
	}
	m, err := client.LockAll(ctx, s, paths)
	if err != nil {
		t.Fatal(err)
	}
	tokens := m.Tokens()
	if len(tokens) != len(paths) {
		t.Fatalf("%d tokens for %d paths", len(tokens), len(paths))
	}
	// All or nothing: with one path taken elsewhere, a try takes none.
	other := session(t, cl, 10*time.Second)
	if err := m.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	blocker := client.NewMutex(other, paths[5])
	if err := blocker.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := client.LockAll(ctx, s, paths, client.WithTry()); !errors.Is(err, client.ErrConflict) {
		t.Fatalf("multi-lock over a held path: %v, want ErrConflict", err)
	}
	for _, p := range paths {
		if p == paths[5] {
			continue
		}
		if info, err := cl.LockInfo(ctx, p); err == nil && len(info.Holders) > 0 {
			t.Fatalf("%s is still held after a refused multi-lock", p)
		}
	}
	if err := blocker.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
}

// testMultiLockers: two sessions lock the same two resources listed in
// opposite orders, many times over, blocking. Sequential lockers would
// deadlock (or be refused as a deadlock); the global order means every
// LockAll succeeds.
func testMultiLockers(t *testing.T, cl *client.Client) {
	ctx := ctxT(t, 120*time.Second)
	a, b := session(t, cl, 10*time.Second), session(t, cl, 10*time.Second)
	guard := fence.NewGuard()
	var wg sync.WaitGroup
	run := func(s *client.Session, paths []string) {
		defer wg.Done()
		for i := 0; i < 15; i++ {
			m, err := client.LockAll(ctx, s, paths)
			if err != nil {
				t.Errorf("LockAll %v: %v", paths, err)
				return
			}
			for p, tok := range m.Tokens() {
				if err := guard.Check(p, tok); err != nil {
					t.Errorf("token went backwards: %v", err)
				}
			}
			if err := m.Unlock(ctx); err != nil {
				t.Errorf("unlock: %v", err)
				return
			}
		}
	}
	wg.Add(2)
	go run(a, []string{"/mla/one", "/mlb/two"})
	go run(b, []string{"/mlb/two", "/mla/one"})
	wg.Wait()
}

func testLockDelay(t *testing.T, cl *client.Client) {
	ctx := ctxT(t, 90*time.Second)
	const path = "/delay/x"
	events := cl.Watch(ctx, path)
	// The watch is registered once it sees a marker written after it.
	if _, err := cl.Put(ctx, path, []byte("marker")); err != nil {
		t.Fatal(err)
	}
	for registered := false; !registered; {
		wr := <-events
		if wr.Err != nil {
			t.Fatal(wr.Err)
		}
		for _, ev := range wr.Events {
			registered = registered || ev.Kind == wire.EvKVPut
		}
	}
	// A single-lock lease of 1 s that is never renewed: it expires.
	held, err := cl.Acquire(ctx, path, time.Second, client.WithLockDelay(8*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	var started, ended wire.Event
	for started.Kind == 0 {
		wr := <-events
		for _, ev := range wr.Events {
			if ev.Kind == wire.EvDelayStarted {
				started = ev
			}
		}
	}
	// During the delay nobody gets the lock: a try is refused with the
	// typed error, and lock introspection shows the delay.
	if _, err := cl.Acquire(ctx, path, 5*time.Second, client.WithTry()); !errors.Is(err, client.ErrLockDelayed) {
		t.Fatalf("try during lock-delay: %v, want ErrLockDelayed", err)
	}
	if info, err := cl.LockInfo(ctx, path); err != nil || info.DelayUntil.IsZero() {
		t.Fatalf("lockinfo during the delay: %+v, %v", info, err)
	}
	// A waiter is granted when the delay ends, by the leader's timer.
	next, err := cl.Acquire(ctx, path, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	var granted wire.Event
	for granted.Kind == 0 {
		wr := <-events
		for _, ev := range wr.Events {
			switch {
			case ev.Kind == wire.EvDelayEnded:
				ended = ev
			case ev.Kind == wire.EvAcquired && ev.Token == next.Token():
				granted = ev
			}
		}
	}
	if ended.Kind == 0 || ended.Rev > granted.Rev || ended.Time < started.Time+started.TTL || started.TTL != 8000 {
		t.Fatalf("delay started %+v, ended %+v, waiter granted %+v: want the grant after the full delay", started, ended, granted)
	}
	if next.Token() <= held.Token() {
		t.Fatal("token did not increase")
	}
	_ = next.Release(ctx)
}

func testRevocation(t *testing.T, cl *client.Client) {
	ctx := ctxT(t, 90*time.Second)
	const path = "/revoke/res"
	holderSess, waiterSess := session(t, cl, 10*time.Second), session(t, cl, 10*time.Second)
	m := client.NewMutex(holderSess, path, client.WithRevocable(), client.WithLockDelay(-1))
	if err := m.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	oldToken := m.Token()
	guard := fence.NewGuard()
	if err := guard.Check(path, oldToken); err != nil {
		t.Fatal(err)
	}
	asked := m.RevokeRequests(ctx)
	w := client.NewMutex(waiterSess, path)
	granted := make(chan error, 1)
	go func() { granted <- w.Lock(ctx) }()
	eventually(t, ctx, "waiter queued", func() bool { return waiters(ctx, cl, path) == 1 })
	// The waiter asks for the lock back, with 1.5 s grace. The holder is
	// told; it ignores the request (a stuck process).
	if err := cl.RevokeLock(ctx, path, 0, 1500*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	req := <-asked
	if req.Token != oldToken || req.Deadline.IsZero() || req.ByAdmin {
		t.Fatalf("revoke request %+v", req)
	}
	if err := <-granted; err != nil {
		t.Fatalf("waiter after the revocation: %v", err)
	}
	if w.Token() <= oldToken {
		t.Fatal("the revocation did not raise the fence")
	}
	if err := guard.Check(path, w.Token()); err != nil {
		t.Fatal(err)
	}
	if err := guard.Check(path, oldToken); !errors.Is(err, fence.ErrStaleToken) {
		t.Fatalf("stale holder after revocation: %v, want fence.ErrStaleToken", err)
	}
	if err := m.Unlock(ctx); !errors.Is(err, client.ErrStaleToken) && !errors.Is(err, client.ErrNotHolder) {
		t.Fatalf("revoked holder's unlock: %v", err)
	}
	// A lock not taken revocable can only be revoked by an admin.
	if err := cl.RevokeLock(ctx, path, 0, time.Second); !errors.Is(err, client.ErrUnauthorized) {
		t.Fatalf("waiter revoking a non-revocable lock: %v, want ErrUnauthorized", err)
	}
	if err := cl.ForceRevokeLock(ctx, path, w.Token(), 0); err != nil {
		t.Fatal(err)
	}
	if err := w.Unlock(ctx); !errors.Is(err, client.ErrStaleToken) && !errors.Is(err, client.ErrNotHolder) {
		t.Fatalf("unlock after an admin revocation: %v", err)
	}
}

func testHandOver(t *testing.T, cl *client.Client) {
	ctx := ctxT(t, 60*time.Second)
	const path = "/elect/svc"
	cand := func(owner string, prio int64) *client.Election {
		return client.NewElection(session(t, cl, 10*time.Second), path, client.WithOwner(owner), client.WithPriority(prio))
	}
	a, d, c, b := cand("a", 0), cand("d", 0), cand("c", 5), cand("b", 1)
	if err := a.Campaign(ctx, []byte("A")); err != nil {
		t.Fatal(err)
	}
	elected := make(chan string, 3)
	for i, e := range []*client.Election{d, c, b} {
		go func() {
			if err := e.Campaign(ctx, []byte(e.Owner())); err != nil {
				t.Error(err)
			}
			elected <- e.Owner()
		}()
		eventually(t, ctx, "candidate queued", func() bool { return waiters(ctx, cl, path) == i+1 })
	}
	// Hand-over to b, although c ranks higher: one step, no gap.
	if err := a.HandOver(ctx, "b"); err != nil {
		t.Fatal(err)
	}
	if got := <-elected; got != "b" {
		t.Fatalf("hand-over elected %s, want b", got)
	}
	if a.IsLeader() {
		t.Fatal("the old leader still believes it leads")
	}
	info, err := cl.Leader(ctx, path)
	if err != nil || info.Owner != "b" {
		t.Fatalf("leader after hand-over: %+v, %v", info, err)
	}
	// b resigns: c (priority 5) wins over d (priority 0), who campaigned first.
	if err := b.Resign(ctx); err != nil {
		t.Fatal(err)
	}
	if got := <-elected; got != "c" {
		t.Fatalf("free leadership went to %s, want the higher-priority c", got)
	}
	if err := c.Resign(ctx); err != nil {
		t.Fatal(err)
	}
	if got := <-elected; got != "d" {
		t.Fatalf("then %s, want d", got)
	}
}

func testDeadlock(t *testing.T, cl *client.Client) {
	ctx := ctxT(t, 60*time.Second)
	// One namespace (/dl/ns), so both locks live in one shard.
	s1, s2 := session(t, cl, 10*time.Second), session(t, cl, 10*time.Second)
	// Wait-for edges run between owners: a unit of work that takes several
	// locks uses one owner for them.
	w1, w2 := client.WithOwner("worker-1"), client.WithOwner("worker-2")
	x1, y2 := client.NewMutex(s1, "/dl/ns/x", w1), client.NewMutex(s2, "/dl/ns/y", w2)
	if err := x1.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := y2.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	y1 := client.NewMutex(s1, "/dl/ns/y", w1)
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	firstWait := make(chan error, 1)
	go func() { firstWait <- y1.Lock(wctx) }()
	eventually(t, ctx, "first waiter queued", func() bool { return waiters(ctx, cl, "/dl/ns/y") == 1 })
	x2 := client.NewMutex(s2, "/dl/ns/x", w2)
	if err := x2.Lock(ctx); !errors.Is(err, client.ErrDeadlock) {
		t.Fatalf("closing a wait-for cycle: %v, want ErrDeadlock", err)
	}
	// The victim backs off (releases y); the first waiter proceeds.
	if err := y2.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-firstWait; err != nil {
		t.Fatal(err)
	}
}

// testExactlyOnce: a request whose answer never reached the client (the
// connection was cut after sending it) is retried with the same client id
// and sequence number: the retry returns the first outcome and the
// operation is applied once.
func testExactlyOnce(t *testing.T, c *nodetest.Cluster, cl *client.Client) {
	ctx := ctxT(t, 60*time.Second)
	const clientID, seq = 0xfeed, 1
	put := &wire.Request{Op: wire.OpKVPut, Path: "/once/counter", Value: []byte("v"), Client: clientID, Seq: seq}
	acq := &wire.Request{Op: wire.OpAcquire, Path: "/once/lock", TTL: 60000, Client: clientID, Seq: seq + 1}
	sendAndVanish(t, c.Endpoints()[0], put, acq)
	eventually(t, ctx, "first put applied", func() bool {
		kv, err := cl.Get(ctx, "/once/counter")
		return err == nil && kv.Version == 1
	})
	eventually(t, ctx, "first acquire applied", func() bool {
		info, err := cl.LockInfo(ctx, "/once/lock")
		return err == nil && len(info.Holders) == 1
	})
	info, _ := cl.LockInfo(ctx, "/once/lock")
	first := info.Holders[0].Token
	// The retries, through another node and the ordinary client.
	again, err := cl.Do(ctx, put)
	if err != nil || again.Version != 1 {
		t.Fatalf("retried put: version %d, %v; want the first outcome (version 1)", again.Version, err)
	}
	kv, err := cl.Get(ctx, "/once/counter")
	if err != nil || kv.Version != 1 {
		t.Fatalf("after the retry the key is at version %d (%v): applied twice", kv.Version, err)
	}
	retried, err := cl.Do(ctx, acq)
	if err != nil || retried.Token != first {
		t.Fatalf("retried acquire: token %d, %v; want the first grant's %d", retried.Token, err, first)
	}
	if info, _ := cl.LockInfo(ctx, "/once/lock"); len(info.Holders) != 1 || info.Holders[0].Count != 1 {
		t.Fatalf("after the retry: %+v", info.Holders)
	}
}

// sendAndVanish sends requests on a raw connection and never reads their
// answers: to the sender they time out.
func sendAndVanish(t *testing.T, addr string, reqs ...*wire.Request) {
	t.Helper()
	nc, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	var buf []byte
	hello := &wire.Request{ID: 1, Op: wire.OpHello, Rev: wire.ProtocolVersion}
	if buf, err = wire.AppendFrame(buf, hello); err != nil {
		t.Fatal(err)
	}
	if _, err := nc.Write(buf); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(nc)
	if _, err := wire.ReadFrame(br, 1<<20, nil); err != nil { // the handshake answer
		t.Fatal(err)
	}
	buf = buf[:0]
	for i, r := range reqs {
		r := *r
		r.ID = uint64(10 + i)
		if buf, err = wire.AppendFrame(buf, &r); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := nc.Write(buf); err != nil {
		t.Fatal(err)
	}
	// Wait for the answers to arrive before hanging up, so the server has
	// run every request; the sender drops them unread (for it, they timed
	// out). Hanging up earlier could withdraw work the server had not read.
	_ = nc.SetReadDeadline(time.Now().Add(20 * time.Second))
	for range reqs {
		if _, err := wire.ReadFrame(br, 1<<20, nil); err != nil {
			t.Fatalf("no answer: %v", err)
		}
	}
}
