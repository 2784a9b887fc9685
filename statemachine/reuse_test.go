package statemachine

import (
	"slices"
	"testing"

	"github.com/wardenlock/warden/wire"
)

// TestReusedNodeCarriesNothingStale: a path that had a holder, a queued
// waiter (with an exactly-once record that still names it) and a KV
// sibling comes and goes; the trie hands its nodes to the paths of a later
// entry, which see none of that, and the old records do not reach them.
func TestReusedNodeCarriesNothingStale(t *testing.T) {
	h := newHarness(t)
	tok := h.mustOK(acq("/a/x/lock", wire.Exclusive, 1, "o1")).Token
	if got := h.do(with(wait(acq("/a/x/lock", wire.Exclusive, 2, "o2")), 9, 1)); got.Code != wire.Queued {
		t.Fatalf("second acquire: %v, want queued", got.Code)
	}
	h.mustOK(&wire.Request{Op: wire.OpKVPut, Path: "/a/x/kv", Value: []byte("v")})
	old := []*lockNode{h.sm.trie.Find("/a"), h.sm.trie.Find("/a/x"), h.sm.trie.Find("/a/x/lock"), h.sm.trie.Find("/a/x/kv")}

	// One entry ends everything under /a: the waiter, the lock, the key.
	for _, r := range h.entry(cancelReq(9, 1), rel("/a/x/lock", tok), &wire.Request{Op: wire.OpKVDelete, Path: "/a/x/kv"}) {
		if r.Code != wire.OK {
			t.Fatalf("ending /a: %v (%s)", r.Code, r.Msg)
		}
	}
	if h.sm.trie.Find("/a") != nil {
		t.Fatal("/a was not pruned")
	}

	// The next entry builds other paths out of the pruned nodes.
	grant := h.mustOK(acq("/b/y/lock", wire.Exclusive, 3, "o3"))
	paths := []string{"/b", "/b/y", "/b/y/lock"}
	reused := 0
	for _, p := range paths {
		n := h.sm.trie.Find(p)
		if slices.Contains(old, n) {
			reused++
		}
		if n.Path() != p || n.Queued() != 0 || n.QueuedTotal() != 0 || n.Val.ext != nil {
			t.Fatalf("%s (reused: %v) has a stale queue or extension", p, slices.Contains(old, n))
		}
		if p != "/b/y/lock" && (n.NumKids() != 1 || slotInUse(n)) {
			t.Fatalf("%s has %d children, payload in use %v", p, n.NumKids(), slotInUse(n))
		}
	}
	if reused == 0 {
		t.Fatal("no pruned node was reused: the test does not test reuse")
	}
	n := h.sm.trie.Find("/b/y/lock")
	var hs []*holder
	forHolders(n, func(x *holder) { hs = append(hs, x) })
	if len(hs) != 1 || hs[0].token != grant.Token || hs[0].lw != 3 || hs[0].node != n || n.NumKids() != 0 {
		t.Fatalf("/b/y/lock has %d holders (want the one of lease 3) and %d children", len(hs), n.NumKids())
	}

	// The cancelled waiter's retry replays its outcome; it neither queues at
	// nor grants the node it used to live in.
	if got := h.do(with(wait(acq("/a/x/lock", wire.Exclusive, 2, "o2")), 9, 1)); got.Code != wire.Cancelled {
		t.Fatalf("retry of the cancelled waiter: %v, want cancelled", got.Code)
	}
	if h.sm.nWaiters != 0 || h.sm.nLocks != 1 || h.sm.trie.Find("/a/x/lock") != nil {
		t.Fatalf("%d waiters, %d locks after the retry", h.sm.nWaiters, h.sm.nLocks)
	}
	h.mustOK(rel("/b/y/lock", grant.Token))
}
