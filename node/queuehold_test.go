package node_test

import (
	"testing"
	"time"

	"github.com/wardenlock/warden/node"
	"github.com/wardenlock/warden/node/nodetest"
	"github.com/wardenlock/warden/shard"
	"github.com/wardenlock/warden/wire"
)

// A waiting acquire on a lock that already has waiters is held back by the
// leader's proposer until the next operation (shard/queuehold.go). With a
// hold longer than the test, the held acquire can only reach the log with
// the holder's release: it must still queue behind the earlier waiter (FIFO)
// and be granted after it, with a larger token.
func TestHeldAcquireJoinsTheRelease(t *testing.T) {
	c := nodetest.Start(t, nodetest.Options{Edit: func(cfg *node.Config) { cfg.Shard.QueueHold = time.Hour }})
	path := "/hold/x/lock"
	sh := leaderShard(t, c, path)
	h := submit(sh, &wire.Request{Op: wire.OpAcquire, Path: path, TTL: 30000, Client: 900, Seq: 1})
	first := await(t, h, "the first acquire")
	w1 := submit(sh, &wire.Request{Op: wire.OpAcquire, Path: path, TTL: 30000, Wait: 60000, Client: 901, Seq: 1})
	waitWaiters(t, sh, path, 1)
	w2 := submit(sh, &wire.Request{Op: wire.OpAcquire, Path: path, TTL: 30000, Wait: 60000, Client: 902, Seq: 1})
	rel := submit(sh, &wire.Request{Op: wire.OpRelease, Path: path, Token: first.Token, Lease: first.Lease, Client: 900, Seq: 2})
	await(t, rel, "the release")
	g1 := await(t, w1, "the first waiter's grant")
	if g1.Token <= first.Token {
		t.Fatalf("first waiter's token %d, not above the holder's %d", g1.Token, first.Token)
	}
	select {
	case r := <-w2:
		t.Fatalf("the second waiter was answered (%v) while the first holds the lock", r.Code)
	default:
	}
	waitWaiters(t, sh, path, 1) // the held acquire went with the release and is queued
	rel = submit(sh, &wire.Request{Op: wire.OpRelease, Path: path, Token: g1.Token, Lease: g1.Lease, Client: 901, Seq: 2})
	await(t, rel, "the first waiter's release")
	if g2 := await(t, w2, "the second waiter's grant"); g2.Token <= g1.Token {
		t.Fatalf("second waiter's token %d, not above the first waiter's %d", g2.Token, g1.Token)
	}
}

// A held acquire that no other operation follows goes on its own once the
// hold is over, and queues.
func TestHeldAcquireGoesAloneAfterTheHold(t *testing.T) {
	c := nodetest.Start(t, nodetest.Options{Edit: func(cfg *node.Config) { cfg.Shard.QueueHold = 20 * time.Millisecond }})
	path := "/hold/y/lock"
	sh := leaderShard(t, c, path)
	first := await(t, submit(sh, &wire.Request{Op: wire.OpAcquire, Path: path, TTL: 30000, Client: 910, Seq: 1}), "the first acquire")
	submit(sh, &wire.Request{Op: wire.OpAcquire, Path: path, TTL: 30000, Wait: 60000, Client: 911, Seq: 1})
	waitWaiters(t, sh, path, 1)
	w2 := submit(sh, &wire.Request{Op: wire.OpAcquire, Path: path, TTL: 30000, Wait: 60000, Client: 912, Seq: 1})
	waitWaiters(t, sh, path, 2)
	if first.Token == 0 {
		t.Fatal("no token")
	}
	select {
	case r := <-w2:
		t.Fatalf("the queued acquire was answered (%v) while the lock is held", r.Code)
	default:
	}
}

func leaderShard(t *testing.T, c *nodetest.Cluster, path string) *shard.Shard {
	t.Helper()
	id := shardOf(t, c, path)
	for {
		if i := c.LeaderOf(id); i >= 0 {
			if sh, ok := c.Nodes[i].Host.Shard(id); ok && sh.IsLeader() {
				return sh
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func submit(sh *shard.Shard, req *wire.Request) chan *wire.Response {
	ch := make(chan *wire.Response, 1)
	sh.Submit(req, func(r *wire.Response) { ch <- r })
	return ch
}

func await(t *testing.T, ch chan *wire.Response, what string) *wire.Response {
	t.Helper()
	select {
	case r := <-ch:
		if r.Code != wire.OK {
			t.Fatalf("%s: %v %s", what, r.Code, r.Msg)
		}
		return r
	case <-time.After(30 * time.Second):
		t.Fatalf("%s: no answer", what)
		return nil
	}
}

// waitWaiters waits until the leader's replica shows n waiters on path.
func waitWaiters(t *testing.T, sh *shard.Shard, path string, n int) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		r := await(t, submit(sh, &wire.Request{Op: wire.OpLockInfo, Path: path}), "lock info")
		if len(r.Waiters) == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s has %d waiters, want %d", path, len(r.Waiters), n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
