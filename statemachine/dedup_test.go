package statemachine

import (
	"fmt"
	"testing"

	"github.com/wardenlock/warden/wire"
)

func TestRetriesApplyOnce(t *testing.T) {
	t.Run("acquire retried returns the first grant", func(t *testing.T) {
		h := newHarness(t)
		a := h.mustOK(with(acq("/l/a", ex, 1, "o"), 3, 1))
		b := h.mustOK(with(acq("/l/a", ex, 1, "o"), 3, 1))
		if b.Token != a.Token || b.Count != 1 {
			t.Fatalf("retry answered token %d count %d; first was %d count 1", b.Token, b.Count, a.Token)
		}
		h.mustOK(rel("/l/a", a.Token)) // one release frees it: the retry took no second hold
		h.mustOK(acq("/l/a", ex, 2, "p"))
	})
	t.Run("release retried after a new grant does not release the new holder", func(t *testing.T) {
		h := newHarness(t)
		a := h.mustOK(acq("/l/a", ex, 1, "o"))
		h.mustOK(with(rel("/l/a", a.Token), 3, 1))
		b := h.mustOK(acq("/l/a", ex, 2, "p"))
		h.mustOK(with(rel("/l/a", a.Token), 3, 1)) // same answer as the first time
		h.expect(acq("/l/a", ex, 9, "z"), wire.Conflict)
		if info := h.read(&wire.Request{Op: wire.OpLockInfo, Path: "/l/a"}); info.Holders[0].Token != b.Token {
			t.Fatalf("the new holder was released: %+v", info.Holders)
		}
		h.expect(rel("/l/a", a.Token), wire.StaleToken) // without dedup the token guards it
	})
	t.Run("queued acquire retried follows its waiter", func(t *testing.T) {
		h := newHarness(t)
		a := h.mustOK(acq("/l/a", ex, 1, "o"))
		req := wait(with(acq("/l/a", ex, 2, "p"), 3, 1))
		h.expect(req, wire.Queued)
		h.expect(req, wire.Queued)
		if st := h.sm.stats(); st.Waiters != 1 {
			t.Fatalf("the retry queued again: %d waiters", st.Waiters)
		}
		g := h.mustOK(rel("/l/a", a.Token)).Grants[0]
		if r := h.mustOK(req); r.Token != g.Token {
			t.Fatalf("retry after the grant answered token %d, want %d", r.Token, g.Token)
		}
	})
	t.Run("ack drops records; older seqs are ambiguous", func(t *testing.T) {
		h := newHarness(t)
		h.mustOK(with(acq("/l/a", ex, 1, "o"), 3, 1))
		r := with(acq("/l/b", ex, 1, "o"), 3, 2)
		r.AckSeq = 2
		h.mustOK(r)
		h.expect(with(acq("/l/a", ex, 1, "o"), 3, 1), wire.Ambiguous)
	})
	t.Run("ack drops records applied out of seq order", func(t *testing.T) {
		// Requests of one client reach a shard over several connections,
		// so seqs are applied out of order; the floor still drops every
		// record below it and keeps the ones above.
		h := newHarness(t)
		for _, seq := range []uint64{4, 1, 3, 2} {
			h.mustOK(with(acq("/l/"+string(rune('a'+seq)), ex, 1, "o"), 3, seq))
		}
		r := with(acq("/l/z", ex, 1, "o"), 3, 5)
		r.AckSeq = 4
		h.mustOK(r)
		for _, seq := range []uint64{1, 2, 3} {
			h.expect(with(acq("/l/"+string(rune('a'+seq)), ex, 1, "o"), 3, seq), wire.Ambiguous)
		}
		h.mustOK(with(acq("/l/e", ex, 1, "o"), 3, 4)) // above the floor: replayed
	})
	t.Run("idle clients are forgotten, not those with waiters", func(t *testing.T) {
		cfg := testConfig()
		cfg.ClientIdleMs = 1000
		h := newHarnessWith(t, cfg)
		a := h.mustOK(with(acq("/l/a", ex, 1, "o"), 3, 1))
		h.expect(wait(with(acq("/l/a", ex, 2, "p"), 4, 1)), wire.Queued)
		h.now += 5000
		h.mustOK(&wire.Request{Op: wire.OpNoop})
		if st := h.sm.stats(); st.Clients != 1 {
			t.Fatalf("%d clients, want only the one with a waiter", st.Clients)
		}
		h.mustOK(with(rel("/l/a", a.Token), 3, 1)) // client 3 forgotten: seq 1 is new again
		h.mustOK(cancelReq(4, 1))
	})
	t.Run("a wait resolved after the floor passed it is still told to its retry", func(t *testing.T) {
		cfg := testConfig()
		cfg.ClientIdleMs = 1000
		h := newHarnessWith(t, cfg)
		a := h.mustOK(acq("/l/a", ex, 1, "o"))
		waitReq := wait(with(acq("/l/a", ex, 2, "p"), 4, 1))
		h.expect(waitReq, wire.Queued)
		next := with(acq("/l/b", ex, 2, "p"), 4, 2)
		next.AckSeq = 2 // passes the queued seq 1
		h.mustOK(next)
		h.now += 900 // the client is away when its wait is granted...
		g := h.mustOK(rel("/l/a", a.Token)).Grants[0]
		h.now += 900 // ...and comes back after ClientIdleMs from its last request
		h.mustOK(&wire.Request{Op: wire.OpNoop})
		retry := *waitReq
		retry.AckSeq = 2
		if r := h.mustOK(&retry); r.Token != g.Token {
			t.Fatalf("re-attached retry answered token %d, want the grant %d", r.Token, g.Token)
		}
		h.mustOK(&retry) // the retry itself does not drop what it reads
		ackd := with(acq("/l/c", ex, 2, "p"), 4, 3)
		ackd.AckSeq = 3 // acknowledged after the resolution: now it may go
		h.mustOK(ackd)
		h.expect(&retry, wire.Ambiguous)
	})
	t.Run("a lingering cancel outcome replays and is dropped by the next ack", func(t *testing.T) {
		h := newHarness(t)
		h.mustOK(acq("/l/a", ex, 1, "o"))
		waitReq := wait(with(acq("/l/a", ex, 2, "p"), 4, 1))
		h.expect(waitReq, wire.Queued)
		next := with(acq("/l/b", ex, 3, "p"), 4, 2)
		next.AckSeq = 2
		h.mustOK(next)
		h.mustOK(revoke(2)) // the waiter's session ends while it is queued
		h.expect(waitReq, wire.SessionExpired)
		if st := h.sm.stats(); st.Clients != 1 {
			t.Fatalf("%d clients", st.Clients)
		}
		later := with(acq("/l/c", ex, 3, "p"), 4, 3)
		later.AckSeq = 2 // leaves the floor where it was, but is above seq 1
		h.mustOK(later)
		h.expect(waitReq, wire.Ambiguous)
	})
	t.Run("resolved outcomes survive snapshots", func(t *testing.T) {
		h := newHarness(t)
		a := h.mustOK(acq("/l/a", ex, 1, "o"))
		waitReq := wait(with(acq("/l/a", ex, 2, "p"), 4, 1))
		h.expect(waitReq, wire.Queued)
		next := with(acq("/l/b", ex, 2, "p"), 4, 2)
		next.AckSeq = 2
		h.mustOK(next)
		g := h.mustOK(rel("/l/a", a.Token)).Grants[0]
		snap := snapshot(t, h.sm)
		r := New(testConfig())
		if err := r.RecoverFromSnapshot(bytesReader(snap), nil, nil); err != nil {
			t.Fatal(err)
		}
		h.sm = r
		h.sm.SetObserver(collector{h})
		if got := h.mustOK(waitReq); got.Token != g.Token {
			t.Fatalf("after recovery the retry answered token %d, want %d", got.Token, g.Token)
		}
	})
}

// TestDroppedRecordsAreReusedWhole: a record the floor drops is reused for
// the next request's outcome (one allocation fewer per op), and nothing of
// its first use survives into the second: a retry of the second request
// replays exactly the second answer.
func TestDroppedRecordsAreReusedWhole(t *testing.T) {
	h := newHarness(t)
	holder := h.mustOK(acq("/l/a", ex, 1, "o"))
	// seq 1: a refusal with a message and no token.
	first := h.expect(with(acq("/l/a", ex, 2, "p"), 3, 1), wire.Conflict)
	if first.Msg == "" {
		t.Fatal("the refusal carries no message; the test needs one")
	}
	// seq 2 acks seq 1: its record is dropped, then reused for seq 2.
	r := with(acq("/l/b", ex, 2, "p"), 3, 2)
	r.AckSeq = 2
	second := h.mustOK(r)
	if n := len(h.sm.freeRecs); n != 0 {
		t.Fatalf("%d dropped records left unused; the new outcome did not reuse one", n)
	}
	again := h.mustOK(r)
	if again.Msg != "" || again.Token != second.Token || again.Lease != second.Lease || again.Rev != second.Rev ||
		again.Mode != second.Mode || again.Count != second.Count {
		t.Fatalf("retry replayed %+v, want the answer %+v", again, second)
	}
	if again.Token == holder.Token {
		t.Fatal("retry replayed the other holder's token")
	}
	// Many rounds through the pool: every retry still replays its own grant.
	for seq := uint64(3); seq < 200; seq++ {
		r := with(acq(fmt.Sprintf("/l/k%d", seq), ex, 2, "p"), 3, seq)
		r.AckSeq = seq
		a := h.mustOK(r)
		if b := h.mustOK(r); b.Token != a.Token || b.Msg != "" {
			t.Fatalf("seq %d: retry replayed token %d msg %q, want token %d", seq, b.Token, b.Msg, a.Token)
		}
	}
}

// A revocation is not answered from a record: the same (client, seq) sent
// again after the lease's locks arrived on this shard (a range moved in
// after the first copy applied here, when the lease was unknown) revokes
// them. Revoking an ended lease changes nothing, so applying it twice is
// harmless.
func TestRevokeRetryIsAppliedAgain(t *testing.T) {
	h := newHarness(t)
	h.mustOK(with(revoke(7), 3, 1)) // the lease is not here yet
	a := h.mustOK(acq("/l/a", ex, 7, "o"))
	h.mustOK(with(revoke(7), 3, 1))
	if info := h.read(&wire.Request{Op: wire.OpLockInfo, Path: "/l/a"}); len(info.Holders) != 0 {
		t.Fatalf("the retried revocation left the lease's lock (token %d): %+v", a.Token, info.Holders)
	}
	h.mustOK(with(revoke(7), 3, 1)) // and again: still fine
}
