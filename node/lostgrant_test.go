package node_test

import (
	"testing"
	"time"

	"github.com/wardenlock/warden/client"
	"github.com/wardenlock/warden/node/nodetest"
	"github.com/wardenlock/warden/wire"
)

// TestStaleCopyOfAWaitDoesNotCancelIt: when a client's connection breaks
// during a waiting acquire, the router it went through may still be
// retrying the request (a range move answers RangeMoving for a while) when
// the client re-sends it through another node. Both copies carry the same
// (client, seq) and the shard keeps one: the client's must win, whichever
// arrives last. Here the stale copy is sent by hand after the client's wait
// is queued, so it deterministically replaces the client's copy; the client
// must take its place back and hear its grant (it used to fail with
// "cancelled: superseded", or, when the stale copy was re-sent later, hear
// nothing at all).
func TestStaleCopyOfAWaitDoesNotCancelIt(t *testing.T) {
	c := nodetest.Start(t, nodetest.Options{Nodes: 3, Shards: 2})
	ctx := ctxT(t, 60*time.Second)
	const path = "/lost/grant/job"
	holderCl := newClient(t, c)
	waiterCl := clientVia(t, c, 0)
	holder := session(t, holderCl, 10*time.Second)
	waiter := session(t, waiterCl, 10*time.Second)
	m1 := client.NewMutex(holder, path)
	if err := m1.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	tok1 := m1.Token()
	events := holderCl.Watch(ctx, path)
	m2 := client.NewMutex(waiter, path, client.WithOwner("w"))
	got := make(chan error, 1)
	go func() { got <- m2.Lock(ctx) }()

	var queued client.Event
	for queued.Kind == 0 {
		select {
		case wr := <-events:
			for _, ev := range wr.Events {
				if ev.Kind == wire.EvQueued && ev.Lease == waiter.Lease() {
					queued = ev
				}
			}
		case <-ctx.Done():
			t.Fatal("the wait never queued")
		}
	}
	if queued.Client != waiterCl.ID() || queued.Seq == 0 {
		t.Fatalf("queued event %+v does not name the waiting request of client %d", queued, waiterCl.ID())
	}

	// The stale copy, as a router that lost its client would send it,
	// through another node.
	stale := dialRaw(t, c.Cfgs[1].ClientAddr)
	stale.send(&wire.Request{ID: 7, Op: wire.OpAcquire, Path: path, Mode: wire.Exclusive, Lease: waiter.Lease(),
		Owner: "w", TTL: 10_000, Wait: 30_000, Client: queued.Client, Seq: queued.Seq})
	if r := stale.recv(); r.Code != wire.Superseded {
		t.Fatalf("the stale copy: %+v, want superseded (the client's re-sent copy takes its place back)", r)
	}
	select {
	case err := <-got:
		t.Fatalf("the client's wait ended before the lock was released: %v", err)
	case <-time.After(300 * time.Millisecond):
	}
	if err := m1.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-got:
		if err != nil {
			t.Fatalf("the waiting client: %v", err)
		}
	case <-ctx.Done():
		t.Fatal("the waiting client never heard of its grant")
	}
	info, err := holderCl.LockInfo(ctx, path)
	if err != nil || len(info.Holders) != 1 || info.Holders[0].Token != m2.Token() || m2.Token() <= tok1 {
		t.Fatalf("after the hand-off: %+v %v; client token %d (first holder %d)", info, err, m2.Token(), tok1)
	}
	if err := m2.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
}
