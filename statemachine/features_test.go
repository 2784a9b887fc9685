package statemachine

import (
	"bytes"
	"slices"
	"testing"

	"github.com/wardenlock/warden/wire"
)

func sem(path string, permits uint32, lease uint64, owner string) *wire.Request {
	r := acq(path, wire.Shared, lease, owner)
	r.Permits = permits
	return r
}

func lockInfo(h *harness, path string) *wire.Response {
	return h.read(&wire.Request{Op: wire.OpLockInfo, Path: path})
}

func eventsOf(h *harness, kind wire.EventKind) []wire.Event {
	var out []wire.Event
	for _, ev := range h.events {
		if ev.Kind == kind {
			out = append(out, ev)
		}
	}
	return out
}

// deadlines applies OpDeadlines at the harness's current time.
func deadlines(h *harness) wire.Response { return h.mustOK(&wire.Request{Op: wire.OpDeadlines}) }

func TestSemaphorePermits(t *testing.T) {
	h := newHarness(t)
	tokens := map[uint64]bool{}
	for _, owner := range []string{"a", "b", "c"} {
		r := h.mustOK(sem("/pool/db", 3, 1, owner))
		if tokens[r.Token] {
			t.Fatalf("permit of %s reuses token %d", owner, r.Token)
		}
		tokens[r.Token] = true
	}
	if info := lockInfo(h, "/pool/db"); info.Permits != 3 || len(info.Holders) != 3 {
		t.Fatalf("lockinfo: %d permits, %d holders; want 3 and 3", info.Permits, len(info.Holders))
	}
	h.expect(sem("/pool/db", 3, 1, "d"), wire.Conflict)
	h.expect(sem("/pool/db", 4, 1, "d"), wire.InvalidArgument)               // the count is fixed while held
	h.expect(acq("/pool/db", wire.Shared, 1, "plain"), wire.Conflict)        // not a permit
	h.expect(acq("/pool/db/x", wire.Exclusive, 1, "child"), wire.Conflict)   // a permit covers the subtree
	h.expect(acq("/pool", wire.Exclusive, 2, "parent"), wire.Conflict)       // and blocks an exclusive parent
	h.mustOK(acq("/pool/other", wire.Exclusive, 2, "sibling"))               // unrelated paths are free
	q := h.expect(with(wait(sem("/pool/db", 3, 1, "d")), 9, 1), wire.Queued) // FIFO waiter
	_ = q
	h.expect(with(wait(sem("/pool/db", 3, 1, "e")), 9, 2), wire.Queued)
	first := lockInfo(h, "/pool/db").Holders[0]
	r := h.mustOK(rel("/pool/db", first.Token))
	if len(r.Grants) != 1 || r.Grants[0].Seq != 1 {
		t.Fatalf("release granted %+v, want the first waiter (seq 1) only", r.Grants)
	}
	if tokens[r.Grants[0].Token] || r.Grants[0].Token <= first.Token {
		t.Fatalf("handed-off permit has token %d: not fresh", r.Grants[0].Token)
	}
	// When every permit is back the path stops being a semaphore.
	for _, hd := range lockInfo(h, "/pool/db").Holders {
		h.mustOK(rel("/pool/db", hd.Token)) // the last waiter is granted on the way
	}
	for _, hd := range lockInfo(h, "/pool/db").Holders {
		h.mustOK(rel("/pool/db", hd.Token))
	}
	h.expect(&wire.Request{Op: wire.OpLockInfo, Path: "/pool/db"}, wire.UnknownOp) // reads are not log ops
	if _, ok := h.sm.sems["/pool/db"]; ok {
		t.Fatal("semaphore count kept after the last permit ended")
	}
	h.mustOK(acq("/pool/db", wire.Exclusive, 1, "now-a-lock"))
}

func TestMultiLockAllOrNothing(t *testing.T) {
	h := newHarness(t)
	h.mustOK(&wire.Request{Op: wire.OpSession, Lease: 1, TTL: 5000})
	multi := func(owner string, paths ...string) *wire.Request {
		return &wire.Request{Op: wire.OpAcquireMulti, Paths: paths, Lease: 1, Owner: owner, TTL: 5000}
	}
	r := h.mustOK(multi("m", "/a/x", "/b/y", "/c/z"))
	if len(r.Holders) != 3 || r.Holders[0].Token == r.Holders[1].Token {
		t.Fatalf("multi answered %+v, want three holders with their own tokens", r.Holders)
	}
	h.mustOK(acq("/d/busy", wire.Exclusive, 2, "other"))
	h.expect(multi("n", "/d/free", "/d/busy"), wire.Conflict)
	if resp, _ := h.sm.Lookup(&wire.Request{Op: wire.OpLockInfo, Path: "/d/free"}); resp.(*wire.Response).Code != wire.NotFound {
		t.Fatal("a refused multi-lock left /d/free held")
	}
	h.expect(multi("n", "/e", "/e/f"), wire.InvalidArgument) // overlapping
	h.expect(&wire.Request{Op: wire.OpAcquireMulti, Paths: []string{"/q"}, TTL: 5000}, wire.InvalidArgument)
	// A retry (same client and seq) replays every token, and never grants twice.
	first := h.mustOK(with(multi("r", "/f/1", "/f/2"), 5, 1))
	again := h.mustOK(with(multi("r", "/f/1", "/f/2"), 5, 1))
	if len(again.Holders) != 2 || again.Holders[0].Token != first.Holders[0].Token || again.Holders[1].Count != 1 {
		t.Fatalf("retry answered %+v, want %+v", again.Holders, first.Holders)
	}
	h.mustOK(rel("/f/1", first.Holders[0].Token))
	h.expect(with(multi("r", "/f/1", "/f/2"), 5, 1), wire.Cancelled)
}

func TestLockDelayAfterExpiry(t *testing.T) {
	h := newHarness(t)
	a := acq("/svc/x", wire.Exclusive, 0, "a")
	a.LockDelay = 2000
	held := h.mustOK(a)
	h.mustOK(expire(held.Lease))
	start := h.now
	h.expect(acq("/svc/x", wire.Exclusive, 0, "b"), wire.LockDelayed)
	h.expect(acq("/svc", wire.Exclusive, 0, "b"), wire.LockDelayed) // an ancestor would cover it
	h.mustOK(acq("/svc/y", wire.Exclusive, 0, "b"))                 // a sibling is free
	if info := lockInfo(h, "/svc/x"); info.DelayUntil != start+2000 {
		t.Fatalf("lockinfo delay until %d, want %d", info.DelayUntil, start+2000)
	}
	if got := h.sm.NextDeadline(); got != start+2000 {
		t.Fatalf("NextDeadline %d, want %d", got, start+2000)
	}
	h.expect(with(wait(acq("/svc/x", wire.Exclusive, 0, "c")), 3, 1), wire.Queued)
	h.now += 1000
	if r := deadlines(h); r.Count != 0 || len(r.Grants) != 0 {
		t.Fatalf("deadlines before the end did %d things", r.Count)
	}
	h.now += 1000
	r := deadlines(h)
	if len(r.Grants) != 1 || r.Grants[0].Seq != 1 {
		t.Fatalf("delay end granted %+v, want the waiter", r.Grants)
	}
	if len(eventsOf(h, wire.EvDelayStarted)) != 1 || len(eventsOf(h, wire.EvDelayEnded)) != 1 {
		t.Fatal("want one delay-started and one delay-ended event")
	}
	if h.sm.NextDeadline() != 0 {
		t.Fatal("NextDeadline still set")
	}
	// A graceful release starts no delay; LockDelayNone turns it off.
	h.mustOK(rel("/svc/x", r.Grants[0].Token))
	h.mustOK(acq("/svc/x", wire.Exclusive, 0, "d"))
}

func TestDefaultLockDelay(t *testing.T) {
	cfg := testConfig()
	cfg.LockDelay = 500
	h := newHarnessWith(t, cfg)
	held := h.mustOK(acq("/d/x", wire.Exclusive, 0, "a"))
	off := acq("/d/y", wire.Exclusive, 0, "a")
	off.LockDelay = wire.LockDelayNone
	heldOff := h.mustOK(off)
	h.mustOK(expire(held.Lease))
	h.mustOK(expire(heldOff.Lease))
	h.expect(acq("/d/x", wire.Exclusive, 0, "b"), wire.LockDelayed)
	h.mustOK(acq("/d/y", wire.Exclusive, 0, "b"))
	h.now += 499
	deadlines(h)
	h.expect(acq("/d/x", wire.Exclusive, 0, "b"), wire.LockDelayed)
	h.now++
	deadlines(h)
	h.mustOK(acq("/d/x", wire.Exclusive, 0, "b"))
}

func TestRevokeWithDeadline(t *testing.T) {
	h := newHarness(t)
	plain := h.mustOK(acq("/r/plain", wire.Exclusive, 0, "a"))
	h.expect(&wire.Request{Op: wire.OpRevokeLock, Path: "/r/plain", Grace: 100}, wire.Unauthorized)
	revocable := acq("/r/x", wire.Exclusive, 0, "a")
	revocable.Flags |= wire.FlagRevocable
	revocable.LockDelay = 300
	held := h.mustOK(revocable)
	h.expect(with(wait(acq("/r/x", wire.Exclusive, 0, "b")), 4, 1), wire.Queued)
	h.mustOK(&wire.Request{Op: wire.OpRevokeLock, Path: "/r/x", Grace: 1000})
	asked := eventsOf(h, wire.EvRevokeRequested)
	if len(asked) != 1 || asked[0].Token != held.Token || asked[0].TTL != 1000 || asked[0].Cause != wire.CauseWaiter {
		t.Fatalf("revoke-requested events %+v", asked)
	}
	if info := lockInfo(h, "/r/x"); info.RevokeAt != h.now+1000 {
		t.Fatalf("lockinfo revoke at %d, want %d", info.RevokeAt, h.now+1000)
	}
	h.now += 999
	deadlines(h)
	if holderByToken(h.sm.trie.Find("/r/x"), held.Token) == nil {
		t.Fatal("revoked before the deadline")
	}
	h.now++
	deadlines(h) // revoked; the lock-delay keeps the waiter out for 300 ms
	h.expect(rel("/r/x", held.Token), wire.StaleToken)
	if ends := eventsOf(h, wire.EvReleased); len(ends) == 0 || ends[len(ends)-1].Cause != wire.CauseForced {
		t.Fatal("no release event with cause forced")
	}
	h.now += 300
	r := deadlines(h)
	if len(r.Grants) != 1 || r.Grants[0].Token <= held.Token {
		t.Fatalf("after the delay: grants %+v, want the waiter with a higher token than %d", r.Grants, held.Token)
	}
	// An admin may revoke any lock, at once with grace 0.
	h.mustOK(&wire.Request{Op: wire.OpRevokeLock, Path: "/r/plain", Token: plain.Token, Flags: wire.FlagForce})
	h.expect(rel("/r/plain", plain.Token), wire.StaleToken)
}

func TestPriorityCampaignAndHandOver(t *testing.T) {
	h := newHarness(t)
	lead := h.mustOK(campaign("/el", 1, "a", "A"))
	h.expect(with(wait(campaign("/el", 5, "z", "Z")), 7, 9), wire.Queued) // priority 0, first in line
	low := wait(campaign("/el", 2, "b", "B"))
	low.Priority = 1
	h.expect(with(low, 7, 1), wire.Queued)
	high := wait(campaign("/el", 3, "c", "C"))
	high.Priority = 5
	h.expect(with(high, 7, 2), wire.Queued)
	// Hand-over to the named successor, although c ranks higher.
	r := h.mustOK(&wire.Request{Op: wire.OpHandOver, Path: "/el", Token: lead.Token, Target: "b"})
	if r.Owner != "b" || r.Token <= lead.Token || len(r.Grants) != 1 || r.Grants[0].Seq != 1 {
		t.Fatalf("hand-over answered owner %q token %d grants %+v", r.Owner, r.Token, r.Grants)
	}
	if got := h.read(&wire.Request{Op: wire.OpLeader, Path: "/el"}); string(got.Value) != "B" {
		t.Fatalf("leader value %q, want B", got.Value)
	}
	h.expect(&wire.Request{Op: wire.OpHandOver, Path: "/el", Token: r.Token, Target: "nobody"}, wire.NotFound)
	// d (priority 0) arrives later than c but ranks lower; resigning hands to c.
	h.expect(with(wait(campaign("/el", 4, "d", "D")), 7, 3), wire.Queued)
	res := h.mustOK(&wire.Request{Op: wire.OpResign, Path: "/el", Token: r.Token})
	if len(res.Grants) != 1 || res.Grants[0].Seq != 2 {
		t.Fatalf("resign granted %+v, want c (seq 2)", res.Grants)
	}
}

func TestDeadlockRefusesYoungestWaiter(t *testing.T) {
	h := newHarness(t)
	h.mustOK(acq("/x", wire.Exclusive, 1, "p"))
	h.mustOK(acq("/y", wire.Exclusive, 2, "q"))
	h.expect(wait(acq("/y", wire.Exclusive, 1, "p")), wire.Queued)   // p waits for q
	h.expect(wait(acq("/x", wire.Exclusive, 2, "q")), wire.Deadlock) // q would wait for p
	// A three-way cycle through a subtree hold.
	h.mustOK(acq("/z/deep", wire.Exclusive, 3, "r"))
	h.expect(wait(acq("/z", wire.Exclusive, 2, "q")), wire.Queued)   // q waits for r
	h.expect(wait(acq("/x", wire.Exclusive, 3, "r")), wire.Deadlock) // r -> p -> q -> r
	// No cycle, no refusal: a third party simply queues.
	h.expect(wait(acq("/x", wire.Exclusive, 4, "s")), wire.Queued)
}

func TestExtrasSurviveSnapshot(t *testing.T) {
	h := newHarness(t)
	h.mustOK(sem("/s/pool", 2, 1, "a"))
	h.mustOK(sem("/s/pool", 2, 1, "b"))
	h.expect(wait(sem("/s/pool", 2, 1, "c")), wire.Queued)
	r := acq("/s/rev", wire.Exclusive, 0, "a")
	r.Flags, r.LockDelay = wire.FlagRevocable, 700
	held := h.mustOK(r)
	h.mustOK(&wire.Request{Op: wire.OpRevokeLock, Path: "/s/rev", Grace: 5000})
	d := acq("/s/gone", wire.Exclusive, 0, "a")
	d.LockDelay = 900
	h.mustOK(expire(h.mustOK(d).Lease))
	c := wait(campaign("/s/el", 2, "x", "X"))
	c.Priority = 3
	h.mustOK(campaign("/s/el", 3, "y", "Y"))
	h.expect(c, wire.Queued)

	snap := snapshot(t, h.sm)
	s2 := New(testConfig())
	if err := s2.RecoverFromSnapshot(bytes.NewReader(snap), nil, nil); err != nil {
		t.Fatal(err)
	}
	checkInvariants(t, s2)
	if !bytes.Equal(snapshot(t, s2), snap) {
		t.Fatal("recovered state saves different bytes")
	}
	if s2.NextDeadline() != h.sm.NextDeadline() || s2.NextDeadline() == 0 {
		t.Fatalf("NextDeadline %d after recovery, want %d", s2.NextDeadline(), h.sm.NextDeadline())
	}
	if x := s2.holdX[held.Token]; x == nil || !x.revocable || x.revokeAt == 0 || x.delay != 700 {
		t.Fatalf("holder extras lost: %+v", x)
	}
	if !slices.Equal(sortedKeys(s2.sems), []string{"/s/pool"}) || s2.delays["/s/gone"] == 0 {
		t.Fatal("semaphores or delays lost")
	}
}
