package statemachine

import (
	"bytes"
	"testing"

	"github.com/wardenlock/warden/wire"
)

// twoShards makes a source (shard 7) owning everything and a destination
// (shard 8) owning nothing yet, as before the first move.
func twoShards(t *testing.T) (src, dst *harness) {
	src = newHarness(t)
	cfg := testConfig()
	cfg.ShardID = 8
	dst = &harness{t: t, sm: New(cfg), now: 1_000_000}
	dst.sm.SetObserver(collector{dst})
	return src, dst
}

// moveAll moves the whole key space ["", "") from src to dst with chunks
// of maxBytes, installing every chunk twice (a driver that resumed).
func moveAll(t *testing.T, src, dst *harness, maxBytes int) {
	rg := wire.Range{Start: "", End: "", Shard: 7}
	src.mustOK(&wire.Request{Op: wire.OpFreezeRange, Gen: 9, Ranges: []wire.Range{rg}})
	v, err := src.sm.Lookup(ExportQuery{})
	if err != nil {
		t.Fatal(err)
	}
	chunks, err := v.(*RangeExport).Chunks(maxBytes)
	if err != nil {
		t.Fatal(err)
	}
	to := wire.Range{Shard: 8, Gen: 2}
	for round := 0; round < 2; round++ {
		for i, c := range chunks {
			req := &wire.Request{Op: wire.OpInstallRange, Gen: 9, Ranges: []wire.Range{to}, Value: c}
			if i == len(chunks)-1 && round == 1 {
				req.Flags |= wire.FlagMoveFinal
			}
			dst.mustOK(req)
		}
	}
	src.mustOK(&wire.Request{Op: wire.OpDropRange, Gen: 9, Ranges: []wire.Range{rg}})
}

func TestMoveCarriesLocksWaitersKeysAndFence(t *testing.T) {
	src, dst := twoShards(t)
	src.mustOK(&wire.Request{Op: wire.OpSession, Lease: 5, TTL: 10_000})
	src.mustOK(&wire.Request{Op: wire.OpSession, Lease: 6, TTL: 10_000})
	held := src.mustOK(with(acq("/a/x/job", ex, 5, "o"), 1, 1))
	src.expect(with(wait(acq("/a/x/job", ex, 6, "p")), 2, 1), wire.Queued)
	single := src.mustOK(&wire.Request{Op: wire.OpAcquire, Path: "/b/y", TTL: 5000})
	src.mustOK(&wire.Request{Op: wire.OpKVPut, Path: "/c/z", Value: []byte("v"), Lease: 5})
	src.mustOK(&wire.Request{Op: wire.OpCampaign, Path: "/e/lead", Lease: 6, Value: []byte("me")})

	// While frozen every op on the range is refused, reads included, and
	// the lease that holds locks there cannot end.
	src.mustOK(&wire.Request{Op: wire.OpFreezeRange, Gen: 9, Ranges: []wire.Range{{Shard: 7}}})
	src.expect(acq("/a/q", ex, 5, "o"), wire.RangeMoving)
	src.expect(expire(5), wire.RangeMoving)
	src.expect(cancelReq(2, 1), wire.RangeMoving)
	if r := src.read(&wire.Request{Op: wire.OpLockInfo, Path: "/a/x/job"}); r.Code != wire.RangeMoving {
		t.Fatalf("read of a frozen range: %v", r.Code)
	}
	// A retry of a request answered before the freeze is refused too: its
	// record must not answer for a range that is leaving.
	src.expect(with(acq("/a/x/job", ex, 5, "o"), 1, 1), wire.RangeMoving)
	src.mustOK(&wire.Request{Op: wire.OpUnfreezeRange, Gen: 9, Ranges: []wire.Range{{Shard: 7}}})

	src.events = nil
	moveAll(t, src, dst, 64) // tiny chunks: one node each
	// The source forgot everything and tells the parked waiter to retry.
	st := src.sm.stats()
	if st.Locks != 0 || st.Waiters != 0 || st.KVs != 0 || len(st.Ranges) != 0 {
		t.Fatalf("source kept state: %+v", st)
	}
	found := false
	for _, ev := range src.events {
		found = found || ev.Kind == wire.EvDequeued && ev.Cause == wire.CauseMoved && ev.Client == 2
	}
	if !found {
		t.Fatal("no moved-dequeue event for the parked waiter")
	}
	src.expect(acq("/a/x/job", ex, 5, "o"), wire.WrongShard)

	// The destination has it all, and answers retries from the records.
	d := dst.sm.stats()
	if d.Locks != 3 || d.Waiters != 1 || d.KVs != 1 {
		t.Fatalf("destination state %+v", d)
	}
	if r := dst.do(with(acq("/a/x/job", ex, 5, "o"), 1, 1)); r.Code != wire.OK || r.Token != held.Token {
		t.Fatalf("retry after the move: %v token %d, want the first grant %d", r.Code, r.Token, held.Token)
	}
	if r := dst.do(with(wait(acq("/a/x/job", ex, 6, "p")), 2, 1)); r.Code != wire.Queued {
		t.Fatalf("queued retry after the move: %v", r.Code)
	}
	// Tokens only go up, and the waiter is granted by a release here.
	rel1 := dst.mustOK(rel("/a/x/job", held.Token))
	_ = rel1
	r := dst.do(with(wait(acq("/a/x/job", ex, 6, "p")), 2, 1))
	if r.Code != wire.OK || r.Token <= single.Token || r.Token <= held.Token {
		t.Fatalf("hand-off after the move: %v token %d (source issued up to %d)", r.Code, r.Token, single.Token)
	}
	dst.mustOK(&wire.Request{Op: wire.OpRenew, Path: "/b/y", Token: single.Token, TTL: 6000})
	if r := dst.read(&wire.Request{Op: wire.OpLeader, Path: "/e/lead"}); r.Code != wire.OK || string(r.Value) != "me" {
		t.Fatalf("election after the move: %v %q", r.Code, r.Value)
	}
	if r := dst.read(&wire.Request{Op: wire.OpKVGet, Path: "/c/z"}); r.Code != wire.OK || string(r.Value) != "v" {
		t.Fatalf("kv after the move: %v", r.Code)
	}
	// Ending the session on the destination releases what moved.
	dst.mustOK(revoke(5))
	if st := dst.sm.stats(); st.KVs != 0 {
		t.Fatalf("the session's key outlived it: %+v", st)
	}
	// Snapshots of both sides still round-trip.
	for _, h := range []*harness{src, dst} {
		var buf bytes.Buffer
		if err := h.sm.SaveSnapshot(&buf, nil, nil); err != nil {
			t.Fatal(err)
		}
		c := New(h.sm.cfg)
		if err := c.RecoverFromSnapshot(&buf, nil, nil); err != nil {
			t.Fatal(err)
		}
		a, _ := h.sm.GetHash()
		b, _ := c.GetHash()
		if a != b {
			t.Fatal("recovered state differs")
		}
	}
}

func TestFrozenRangeSurvivesSnapshot(t *testing.T) {
	src := newHarness(t)
	src.mustOK(&wire.Request{Op: wire.OpFreezeRange, Gen: 3, Ranges: []wire.Range{{Shard: 7}}})
	var buf bytes.Buffer
	if err := src.sm.SaveSnapshot(&buf, nil, nil); err != nil {
		t.Fatal(err)
	}
	c := New(src.sm.cfg)
	if err := c.RecoverFromSnapshot(&buf, nil, nil); err != nil {
		t.Fatal(err)
	}
	h := &harness{t: t, sm: c, now: 2_000_000, index: 100}
	h.expect(acq("/a/b", ex, 0, ""), wire.RangeMoving)
	h.expect(&wire.Request{Op: wire.OpFreezeRange, Gen: 4, Ranges: []wire.Range{{Shard: 7}}}, wire.RangeMoving)
}

func TestInstallRefusesForeignPathsAndTokenClash(t *testing.T) {
	src, dst := twoShards(t)
	dst.mustOK(&wire.Request{Op: wire.OpSetRanges, Gen: 1, Ranges: []wire.Range{{Start: "\x80", Shard: 8}}})
	src.mustOK(&wire.Request{Op: wire.OpAcquire, Path: "/a/x", TTL: 5000})
	src.mustOK(&wire.Request{Op: wire.OpFreezeRange, Gen: 9, Ranges: []wire.Range{{Shard: 7}}})
	v, _ := src.sm.Lookup(ExportQuery{})
	chunks, _ := v.(*RangeExport).Chunks(1 << 20)
	// The whole space overlaps what the destination owns.
	dst.expect(&wire.Request{Op: wire.OpInstallRange, Gen: 9, Flags: wire.FlagMoveFinal,
		Ranges: []wire.Range{{Shard: 8}}, Value: chunks[0]}, wire.InvalidArgument)
	if st := dst.sm.stats(); st.Locks != 0 {
		t.Fatal("a refused install changed state")
	}
}

func TestInstallRefusesSingleLeaseTokenClash(t *testing.T) {
	src, dst := twoShards(t)
	ka, kq := wire.RouteKey("/a/x"), wire.RouteKey("/q/w")
	moving := wire.Range{Start: ka, End: ka + "\x00", Shard: 7}
	src.mustOK(&wire.Request{Op: wire.OpSetRanges, Gen: 2, Ranges: []wire.Range{{End: ka, Shard: 7}, moving, {Start: ka + "\x00", Shard: 7}}})
	dst.mustOK(&wire.Request{Op: wire.OpSetRanges, Gen: 2, Ranges: []wire.Range{{Start: kq, End: kq + "\x00", Shard: 8}}})
	a := src.mustOK(&wire.Request{Op: wire.OpAcquire, Path: "/a/x", TTL: 5000})
	q := dst.mustOK(&wire.Request{Op: wire.OpAcquire, Path: "/q/w", TTL: 5000})
	if a.Token != q.Token {
		t.Fatalf("tokens %d and %d: the test needs a clash", a.Token, q.Token)
	}
	src.mustOK(&wire.Request{Op: wire.OpFreezeRange, Gen: 9, Ranges: []wire.Range{moving}})
	v, _ := src.sm.Lookup(ExportQuery{Start: moving.Start, End: moving.End})
	chunks, _ := v.(*RangeExport).Chunks(1 << 20)
	to := moving
	to.Shard = 8
	dst.expect(&wire.Request{Op: wire.OpInstallRange, Gen: 9, Flags: wire.FlagMoveFinal,
		Ranges: []wire.Range{to}, Value: chunks[0]}, wire.Conflict)
	if st := dst.sm.stats(); st.Locks != 1 || len(st.Ranges) != 1 {
		t.Fatalf("a refused install changed state: %+v", st)
	}
	// Rollback: unfreeze, and the source serves the range again.
	src.mustOK(&wire.Request{Op: wire.OpUnfreezeRange, Gen: 9, Ranges: []wire.Range{moving}})
	src.mustOK(rel("/a/x", a.Token))
}

// TestMoveCarriesOptionsDelaysAndOwners: what the features and lease
// ownership added to a lock travels with its range: semaphore permits, a
// pending revocation, a lock-delay in force (also one whose lock is gone),
// a waiter's options and the identity a lease is bound to. The source keeps
// none of it.
func TestMoveCarriesOptionsDelaysAndOwners(t *testing.T) {
	src, dst := twoShards(t)
	five := keyedLease(5)
	src.mustOK(as("alice", &wire.Request{Op: wire.OpSession, Lease: five, TTL: 10_000}))
	sem := as("alice", acq("/s/x", wire.Shared, five, "o"))
	sem.Permits = 2
	src.mustOK(sem)
	rv := as("alice", acq("/r/x", ex, five, "o"))
	rv.Flags |= wire.FlagRevocable
	held := src.mustOK(rv)
	src.mustOK(&wire.Request{Op: wire.OpRevokeLock, Path: "/r/x", Grace: 1000})
	revokeAt := lockInfo(src, "/r/x").RevokeAt
	single := src.mustOK(as("alice", acq("/s/z", ex, 0, "o")))
	w := as("carol", with(wait(acq("/r/x", ex, 0, "b")), 4, 1))
	w.LockDelay = 700
	src.expect(w, wire.Queued)
	d := acq("/d/x", ex, 0, "a")
	d.LockDelay = 5000
	gone := src.mustOK(d)
	src.mustOK(expire(gone.Lease))
	delayUntil := lockInfo(src, "/d/x").DelayUntil
	if revokeAt == 0 || delayUntil == 0 {
		t.Fatalf("setup: revoke at %d, delay until %d", revokeAt, delayUntil)
	}

	moveAll(t, src, dst, 64)

	if n := len(src.sm.holdX) + len(src.sm.waitX) + len(src.sm.sems) + len(src.sm.delays); n != 0 {
		t.Fatalf("source kept %d option entries", n)
	}
	if info := lockInfo(dst, "/s/x"); info.Permits != 2 {
		t.Fatalf("semaphore permits after the move: %d", info.Permits)
	}
	if info := lockInfo(dst, "/r/x"); info.RevokeAt != revokeAt {
		t.Fatalf("revocation deadline after the move: %d, want %d", info.RevokeAt, revokeAt)
	}
	if info := lockInfo(dst, "/d/x"); info.DelayUntil != delayUntil {
		t.Fatalf("lock-delay after the move: %d, want %d", info.DelayUntil, delayUntil)
	}
	dst.expect(acq("/d/x", ex, 0, "c"), wire.LockDelayed)
	if got := dst.sm.NextDeadline(); got != min(revokeAt, delayUntil) {
		t.Fatalf("destination's next deadline %d, want %d", got, min(revokeAt, delayUntil))
	}
	if len(dst.sm.waitX) != 1 {
		t.Fatalf("waiter options after the move: %d entries", len(dst.sm.waitX))
	}
	for _, x := range dst.sm.waitX {
		if x.delay != 700 {
			t.Fatalf("waiter options %+v", *x)
		}
	}
	dst.expect(as("bob", acq("/s/y", ex, five, "o")), wire.Unauthorized)
	dst.mustOK(as("alice", acq("/s/y", ex, five, "o")))
	if len(src.sm.singleOwn)+len(src.sm.waitOwn) != 0 {
		t.Fatalf("source kept single-lock owners %v, queued %v", src.sm.singleOwn, src.sm.waitOwn)
	}
	for _, o := range dst.sm.waitOwn {
		if o != "carol" || len(dst.sm.waitOwn) != 1 {
			t.Fatalf("queued single-lock owners after the move: %v", dst.sm.waitOwn)
		}
	}
	dst.expect(as("bob", rel("/s/z", single.Token)), wire.Unauthorized)
	dst.mustOK(as("alice", rel("/s/z", single.Token)))
	// At the deadline the moved revocation happens on the destination.
	dst.now = revokeAt
	deadlines(dst)
	dst.expect(rel("/r/x", held.Token), wire.StaleToken)
}
