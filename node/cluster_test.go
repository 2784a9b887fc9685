package node_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/wardenlock/warden/client"
	"github.com/wardenlock/warden/node/nodetest"
	"github.com/wardenlock/warden/wire"
)

func newClient(t *testing.T, c *nodetest.Cluster) *client.Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cl, err := client.New(ctx, c.AllEndpoints(), client.WithRequestTimeout(15*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cl.Close() })
	return cl
}

func ctxT(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

func session(t *testing.T, cl *client.Client, ttl time.Duration) *client.Session {
	t.Helper()
	s, err := cl.NewSession(ctxT(t, 5*time.Second), client.WithTTL(ttl))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		s.Close(ctx)
	})
	return s
}

// TestLockSemanticsOverTheWire covers exclusive, shared, hierarchical,
// reentrant and fenced behaviour through router, Raft and state machine.
func TestLockSemanticsOverTheWire(t *testing.T) {
	c := nodetest.Start(t, nodetest.Options{})
	cl := newClient(t, c)
	ctx := ctxT(t, 60*time.Second)
	a, b := session(t, cl, 10*time.Second), session(t, cl, 10*time.Second)

	parent := client.NewMutex(a, "/locks/billing", client.WithOwner("billing-job"))
	if err := parent.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	first := parent.Token()
	if first == 0 {
		t.Fatal("grant without a fencing token")
	}
	cases := []struct {
		name string
		m    func() error
		want error
	}{
		{"same path, other session", func() error { return client.NewMutex(b, "/locks/billing").TryLock(ctx) }, client.ErrConflict},
		{"child of held parent", func() error { return client.NewMutex(b, "/locks/billing/job-7").TryLock(ctx) }, client.ErrConflict},
		{"shared child of exclusive parent", func() error {
			return client.NewRWMutex(b, "/locks/billing/job-7").TryRLock(ctx)
		}, client.ErrConflict},
		{"sibling namespace is free", func() error { return client.NewMutex(b, "/locks/orders/x").TryLock(ctx) }, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.m()
			if tc.want == nil && err != nil || tc.want != nil && !errors.Is(err, tc.want) {
				t.Fatalf("got %v, want %v", err, tc.want)
			}
		})
	}

	// Reentrant: the same owner (session + owner name) gets the same token.
	// Distinct Mutex values are distinct owners unless named alike.
	again := client.NewMutex(a, "/locks/billing", client.WithOwner("billing-job"))
	if err := again.Lock(ctx); err != nil || again.Token() != first {
		t.Fatalf("reentrant acquire: err=%v token=%d want %d", err, again.Token(), first)
	}
	if err := again.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := client.NewMutex(b, "/locks/billing").TryLock(ctx); !errors.Is(err, client.ErrConflict) {
		t.Fatalf("one of two holds released, lock must still be held: %v", err)
	}
	if err := parent.Unlock(ctx); err != nil {
		t.Fatal(err)
	}

	// Shared locks coexist; an exclusive one waits for them.
	r1, r2 := client.NewRWMutex(a, "/locks/reports"), client.NewRWMutex(b, "/locks/reports")
	if err := r1.RLock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := r2.RLock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := client.NewRWMutex(b, "/locks/reports/q1").TryLock(ctx); !errors.Is(err, client.ErrConflict) {
		t.Fatalf("exclusive child under shared parent: %v", err)
	}
	r1.RUnlock(ctx)
	r2.RUnlock(ctx)

	// Fencing tokens strictly increase per path across grants.
	var last uint64 = first
	for i := 0; i < 5; i++ {
		m := client.NewMutex(b, "/locks/billing")
		if err := m.Lock(ctx); err != nil {
			t.Fatal(err)
		}
		if m.Token() <= last {
			t.Fatalf("token %d after %d: not increasing", m.Token(), last)
		}
		last = m.Token()
		m.Unlock(ctx)
	}

	// Release by token only: a stale token cannot release the current holder.
	holder, err := cl.Acquire(ctx, "/locks/fenced/r", 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := cl.Do(ctx, &wire.Request{Op: wire.OpRelease, Path: "/locks/fenced/r", Token: holder.Token() - 1})
	if err == nil && resp.Code == wire.OK {
		t.Fatal("a wrong token released the lock")
	}
	if err := holder.Release(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestSessionExpiryHandsOffToWaiter: a session that stops keeping alive
// loses its lock no earlier than its TTL and within TTL+1s; the queued
// waiter gets the lock.
func TestSessionExpiryHandsOffToWaiter(t *testing.T) {
	c := nodetest.Start(t, nodetest.Options{})
	ctx := ctxT(t, 60*time.Second)
	holderClient := newClient(t, c)
	ttl := 2 * time.Second
	dying := session(t, holderClient, ttl)
	m := client.NewMutex(dying, "/jobs/nightly/run")
	if err := m.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	waiterClient := newClient(t, c)
	waiter := client.NewMutex(session(t, waiterClient, 10*time.Second), "/jobs/nightly/run")
	second := client.NewMutex(session(t, waiterClient, 10*time.Second), "/jobs/nightly/run")
	granted := make(chan time.Time, 1)
	go func() {
		if err := waiter.Lock(ctx); err == nil {
			granted <- time.Now()
		}
	}()
	time.Sleep(200 * time.Millisecond) // the first waiter queues first
	secondDone := make(chan error, 1)
	go func() { secondDone <- second.Lock(ctx) }()
	time.Sleep(200 * time.Millisecond)
	// The holder's process "dies": its connections go away, nothing keeps
	// the session alive. The lease counts from the last acknowledged keepalive.
	lastKeepalive := time.Now()
	holderClient.Close()
	select {
	case at := <-granted:
		held := at.Sub(lastKeepalive)
		if held < ttl-time.Duration(float64(ttl)/3) {
			// keepalives run at TTL/3, so the last acknowledged one may be
			// up to TTL/3 before lastKeepalive.
			t.Fatalf("lock handed over %v after the holder died, before its TTL %v", held, ttl)
		}
		if held > ttl+time.Second {
			t.Fatalf("lock handed over %v after the holder died; want within TTL+1s", held)
		}
	case <-time.After(ttl + 5*time.Second):
		t.Fatal("waiter never got the lock after the holder's session expired")
	}
	if waiter.Token() <= m.Token() {
		t.Fatalf("waiter token %d not above the expired holder's %d", waiter.Token(), m.Token())
	}
	// Only the granted waiter was told: the second one still waits.
	select {
	case err := <-secondDone:
		t.Fatalf("the second waiter was answered (%v) while the first holds the lock", err)
	case <-time.After(500 * time.Millisecond):
	}
	if err := waiter.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-secondDone; err != nil || second.Token() <= waiter.Token() {
		t.Fatalf("second waiter after the release: %v token %d", err, second.Token())
	}
}

// TestLeaderKillKeepsLocks kills the leader of a shard with a held lock and
// a queued waiter: both survive, tokens keep increasing, and the lease is
// not expired early by the new leader.
func TestLeaderKillKeepsLocks(t *testing.T) {
	c := nodetest.Start(t, nodetest.Options{})
	ctx := ctxT(t, 90*time.Second)
	cl := newClient(t, c)
	s := session(t, cl, 3*time.Second)
	path := "/ha/leader-kill/a"
	m := client.NewMutex(s, path)
	if err := m.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	other := session(t, cl, 10*time.Second)
	w := client.NewMutex(other, path)
	waitDone := make(chan error, 1)
	go func() { waitDone <- w.Lock(ctx) }()
	time.Sleep(200 * time.Millisecond)

	shardID := shardOf(t, c, path)
	leader := c.LeaderOf(shardID)
	c.StopNode(leader)
	defer c.StartNode(leader)

	// The holder's session keeps going through the failover.
	time.Sleep(4 * time.Second) // > TTL: only keepalives can have saved the lease
	info, err := cl.LockInfo(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	if len(info.Holders) != 1 || info.Holders[0].Token != m.Token() {
		t.Fatalf("holder lost across leader failover: %+v", info)
	}
	if len(info.Waiters) != 1 {
		t.Fatalf("waiter lost across leader failover: %+v", info)
	}
	if err := m.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-waitDone; err != nil {
		t.Fatalf("waiter: %v", err)
	}
	if w.Token() <= m.Token() {
		t.Fatalf("token went backwards across failover: %d then %d", m.Token(), w.Token())
	}
}

func shardOf(t *testing.T, c *nodetest.Cluster, path string) uint64 {
	t.Helper()
	for _, n := range c.Nodes {
		if n == nil {
			continue
		}
		r, err := n.Host.Table().Locate(path)
		if err != nil {
			t.Fatal(err)
		}
		return r.Shard
	}
	t.Fatal("no running node")
	return 0
}

// TestRestartEverything stops every node and starts them again: locks,
// leases, KV keys and the fencing counter are all back.
func TestRestartEverything(t *testing.T) {
	c := nodetest.Start(t, nodetest.Options{})
	ctx := ctxT(t, 120*time.Second)
	cl := newClient(t, c)
	s := session(t, cl, 30*time.Second)
	var tokens []uint64
	for i := 0; i < 10; i++ {
		m := client.NewMutex(s, fmt.Sprintf("/persist/ns-%d/lock", i))
		if err := m.Lock(ctx); err != nil {
			t.Fatal(err)
		}
		tokens = append(tokens, m.Token())
	}
	if _, err := cl.Put(ctx, "/persist/kv/key", []byte("value")); err != nil {
		t.Fatal(err)
	}
	c.StopAll()
	for i := range c.Nodes {
		c.StartNode(i)
	}
	c.WaitReady(60 * time.Second)
	for i := 0; i < 10; i++ {
		info, err := cl.LockInfo(ctx, fmt.Sprintf("/persist/ns-%d/lock", i))
		if err != nil {
			t.Fatal(err)
		}
		if len(info.Holders) != 1 || info.Holders[0].Token != tokens[i] || info.Holders[0].Lease != s.Lease() {
			t.Fatalf("lock %d after restart: %+v (want token %d)", i, info, tokens[i])
		}
	}
	kv, err := cl.Get(ctx, "/persist/kv/key")
	if err != nil || string(kv.Value) != "value" {
		t.Fatalf("kv after restart: %+v %v", kv, err)
	}
	// The counter survived: a new grant on a restored path's shard is higher.
	other := session(t, cl, 10*time.Second)
	if err := client.NewMutex(other, "/persist/ns-0/lock/child").TryLock(ctx); !errors.Is(err, client.ErrConflict) {
		t.Fatalf("child of a restored lock: got %v, want conflict", err)
	}
	fresh := client.NewMutex(other, "/persist/ns-0-new/x")
	if err := fresh.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	if fresh.Token() == 0 {
		t.Fatal("no token")
	}
	for i, tok := range tokens {
		if shardOf(t, c, fmt.Sprintf("/persist/ns-%d/lock", i)) == shardOf(t, c, "/persist/ns-0-new/x") && fresh.Token() <= tok {
			t.Fatalf("token %d after restart is not above %d issued before", fresh.Token(), tok)
		}
	}
}

// TestListAcrossShards: a prefix shallower than the namespace depth covers
// every shard; the router asks each and merges the answers in path order.
func TestListAcrossShards(t *testing.T) {
	c := nodetest.Start(t, nodetest.Options{Shards: 4})
	ctx := ctxT(t, 60*time.Second)
	cl := newClient(t, c)
	s := session(t, cl, 10*time.Second)
	shards := map[uint64]bool{}
	for i := 0; i < 12; i++ {
		p := fmt.Sprintf("/list/ns-%02d/lock", i)
		if err := client.NewMutex(s, p).Lock(ctx); err != nil {
			t.Fatal(err)
		}
		if _, err := cl.Put(ctx, fmt.Sprintf("/list/ns-%02d/key", i), []byte("v")); err != nil {
			t.Fatal(err)
		}
		shards[shardOf(t, c, p)] = true
	}
	if len(shards) < 2 {
		t.Fatalf("12 namespaces landed on %d shard(s); the test needs several", len(shards))
	}
	for _, prefix := range []string{"/", "/list"} {
		holders, err := cl.ListLocks(ctx, prefix)
		if err != nil {
			t.Fatalf("ListLocks(%s): %v", prefix, err)
		}
		if len(holders) != 12 {
			t.Fatalf("ListLocks(%s) = %d holders, want 12", prefix, len(holders))
		}
		for i := 1; i < len(holders); i++ {
			if holders[i-1].Path >= holders[i].Path {
				t.Fatalf("not in path order: %s then %s", holders[i-1].Path, holders[i].Path)
			}
		}
		kvs, err := cl.List(ctx, prefix)
		if err != nil || len(kvs) != 12 {
			t.Fatalf("List(%s) = %d keys, %v; want 12", prefix, len(kvs), err)
		}
	}
}
