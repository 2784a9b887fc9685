package client

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/wardenlock/warden/wire"
)

// TestDirectRouting: the client learns the table from the endpoint it knows
// and then sends requests on a path straight to the shard leader's node;
// a NotLeader answer there makes it refresh and still get its answer.
func TestDirectRouting(t *testing.T) {
	var leaderSaw atomic.Int32
	leader := newFakeServer(t, func(fc *fakeConn, req *wire.Request) {
		if req.Op == wire.OpKVGet {
			leaderSaw.Add(1)
		}
		fc.answer(req, wire.Response{Value: []byte("from-leader")})
	})
	var entrySaw atomic.Int32
	entry := newFakeServer(t, func(fc *fakeConn, req *wire.Request) {
		switch req.Op {
		case wire.OpRanges:
			fc.answer(req, wire.Response{Table: &wire.RouteTable{Gen: 1, Depth: 2,
				Ranges:  []wire.Range{{Shard: 2, Gen: 1}},
				Leaders: []wire.ShardLeader{{Shard: 2, Addr: leader.addr()}}}})
		case wire.OpKVGet:
			entrySaw.Add(1)
			fc.answer(req, wire.Response{Value: []byte("forwarded")})
		default:
			fc.answer(req, wire.Response{})
		}
	})
	c := newTestClient(t, []string{entry.addr()}, func(cfg *config) { cfg.direct = true })
	ctx := testContext(t)
	eventually(t, "requests to reach the leader directly", func() bool {
		_, err := c.Do(ctx, &wire.Request{Op: wire.OpKVGet, Path: "/a/b/c"})
		return err == nil && leaderSaw.Load() > 0
	})
	before := entrySaw.Load()
	for i := 0; i < 5; i++ {
		resp, err := c.Do(ctx, &wire.Request{Op: wire.OpKVGet, Path: "/a/b/c"})
		if err != nil || string(resp.Value) != "from-leader" {
			t.Fatalf("got %+v, %v", resp, err)
		}
	}
	if entrySaw.Load() != before {
		t.Fatal("requests still went through the entry node once the leader's connection was up")
	}
	// A prefix request has no single shard: it goes through the pool.
	if _, err := c.Do(ctx, &wire.Request{Op: wire.OpKVList, Path: "/", Flags: wire.FlagPrefix}); err != nil {
		t.Fatal(err)
	}
}

func TestRouteTableLocate(t *testing.T) {
	mid := "\x80\x00\x00\x00\x00\x00\x00\x00"
	rt := &wire.RouteTable{Depth: 2, Ranges: []wire.Range{{End: mid, Shard: 2}, {Start: mid, Shard: 3}}}
	seen := map[uint64]bool{}
	for _, p := range []string{"/a/b", "/a/c/d", "/x/y", "/locks/billing/job-1", "/locks/orders"} {
		s, ok := rt.Locate(p)
		if !ok {
			t.Fatalf("%s: not located", p)
		}
		seen[s] = true
	}
	if len(seen) != 2 {
		t.Fatal("five namespaces all landed on one of two ranges")
	}
	if _, ok := rt.Locate("/a"); ok {
		t.Fatal("a path shallower than the namespace depth spans both ranges")
	}
}

// A Mutex remembers its path's direct connection (routeCache): the answer
// is reused while the route table and the set of direct connections are
// the ones it was found in and the connection is up, and looked up again
// as soon as any of them changes.
func TestRouteCacheFollowsTableAndConnections(t *testing.T) {
	mid := "\x80\x00\x00\x00\x00\x00\x00\x00"
	ranges := []wire.Range{{End: mid, Shard: 2}, {Start: mid, Shard: 3}}
	r := newDirectRouter(&Client{})
	conns := map[string]*conn{}
	for _, addr := range []string{"a:1", "b:1"} {
		conns[addr] = &conn{addr: addr, closed: make(chan struct{})}
		r.setConn(addr, conns[addr])
	}
	r.table.Store(&wire.RouteTable{Depth: 2, Ranges: ranges,
		Leaders: []wire.ShardLeader{{Shard: 2, Addr: "a:1"}, {Shard: 3, Addr: "b:1"}}})
	path := "/locks/billing/job-1"
	req := &wire.Request{Op: wire.OpAcquire, Path: path}
	shard, _ := r.table.Load().Locate(path)
	leader, other := "a:1", "b:1"
	if shard == 3 {
		leader, other = other, leader
	}
	var rc routeCache
	pick := func() *conn {
		t.Helper()
		cn, err := r.pick(context.Background(), req, &rc)
		if err != nil {
			t.Fatal(err)
		}
		return cn
	}
	if cn := pick(); cn.addr != leader {
		t.Fatalf("picked %s, want the leader %s", cn.addr, leader)
	}
	first := rc.last.Load()
	if cn := pick(); cn.addr != leader || rc.last.Load() != first {
		t.Fatalf("picked %s (entry replaced: %v), want %s from the cache", cn.addr, rc.last.Load() != first, leader)
	}

	// The leader moves: a new table.
	r.learn(&wire.Hint{Shard: shard, Leader: other})
	if cn := pick(); cn.addr != other {
		t.Fatalf("picked %s after the leader moved, want %s", cn.addr, other)
	}

	// The connection breaks and a new one replaces it.
	close(conns[other].closed)
	fresh := &conn{addr: other, closed: make(chan struct{})}
	r.mu.Lock()
	r.setConn(other, fresh)
	r.mu.Unlock()
	if cn := pick(); cn != fresh {
		t.Fatalf("picked %p (broken: %v), want the new connection", cn, cn.broken())
	}

	// A broken connection is never returned from the cache, even while the
	// set of connections still names it.
	close(fresh.closed)
	r.mu.Lock()
	r.dialing[other] = true // no dial from the test
	r.mu.Unlock()
	if cn := rc.lookup(r.table.Load(), r.conns.Load()); cn != nil {
		t.Fatal("the cache returned a broken connection")
	}

	// No cache: nothing remembered, same answer.
	var none *routeCache
	if cn := none.lookup(r.table.Load(), r.conns.Load()); cn != nil {
		t.Fatal("a nil cache remembered a connection")
	}
}
