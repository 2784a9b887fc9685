package client

import (
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
