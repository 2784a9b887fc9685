package statemachine

import (
	"testing"

	"github.com/wardenlock/warden/wire"
)

func grantSeqs(r wire.Response) []uint64 {
	var out []uint64
	for _, g := range r.Grants {
		out = append(out, g.Seq)
	}
	return out
}

func equalSeqs(a, b []uint64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestHandOff(t *testing.T) {
	type q struct {
		path string
		mode wire.Mode
	}
	cases := []struct {
		name    string
		held    q   // held by lease 1, released by the test
		queue   []q // queued in order by clients 1..n (seq = index+1)
		granted []uint64
	}{
		{"exclusive queue grants one", q{"/l/a", ex}, []q{{"/l/a", ex}, {"/l/a", ex}}, []uint64{1}},
		{"consecutive shared waiters go together", q{"/l/a", ex}, []q{{"/l/a", sh}, {"/l/a", sh}, {"/l/a", ex}, {"/l/a", sh}}, []uint64{1, 2}},
		{"exclusive head blocks later shared", q{"/l/a", ex}, []q{{"/l/a", ex}, {"/l/a", sh}}, []uint64{1}},
		{"parent release wakes children", q{"/l", ex}, []q{{"/l/a", ex}, {"/l/b", ex}, {"/l/a", ex}}, []uint64{1, 2}},
		{"child release wakes parent", q{"/l/a", ex}, []q{{"/l", ex}, {"/l/b", ex}}, []uint64{1}},
		{"no barging past a queued parent", q{"/l/a", sh}, []q{{"/l", ex}, {"/l/b", sh}}, []uint64{1}},
		{"unrelated waiter not blocked by earlier one", q{"/l", ex}, []q{{"/l/a", ex}, {"/l/a", ex}, {"/l/b", sh}}, []uint64{1, 3}},
		{"shared head blocked keeps later exclusive behind", q{"/l/a/x", ex}, []q{{"/l/a", sh}, {"/l/a", ex}, {"/l/a/y", sh}}, []uint64{1}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			held := h.mustOK(acq(tc.held.path, tc.held.mode, 1, "holder"))
			for i, w := range tc.queue {
				h.expect(wait(with(acq(w.path, w.mode, uint64(10+i), "w"), uint64(i+1), uint64(i+1))), wire.Queued)
			}
			got := h.mustOK(rel(tc.held.path, held.Token))
			if !equalSeqs(grantSeqs(got), tc.granted) {
				t.Fatalf("granted seqs %v, want %v", grantSeqs(got), tc.granted)
			}
			for _, g := range got.Grants {
				if g.Token == 0 || g.Lease != 10+g.Client-1 {
					t.Fatalf("grant %+v lacks its token or lease", g)
				}
			}
		})
	}
}

func TestNoBarging(t *testing.T) {
	h := newHarness(t)
	h.mustOK(acq("/l/a", sh, 1, "o"))
	h.expect(wait(acq("/l/a", ex, 2, "p")), wire.Queued)
	// The holders would allow a second shared hold, but an exclusive
	// request is queued first: a try fails, a wait queues behind it.
	h.expect(acq("/l/a", sh, 3, "q"), wire.Conflict)
	h.expect(wait(acq("/l/a/deep", sh, 3, "q")), wire.Queued)
	h.mustOK(acq("/l/other", ex, 3, "q"))
}

func TestHandOffEvents(t *testing.T) {
	h := newHarness(t)
	a := h.mustOK(acq("/l/a", ex, 1, "o"))
	h.expect(wait(with(acq("/l/a", ex, 2, "p"), 5, 9)), wire.Queued)
	h.events = nil
	r := h.mustOK(rel("/l/a", a.Token))
	kinds := []wire.EventKind{}
	for _, ev := range h.events {
		kinds = append(kinds, ev.Kind)
	}
	if len(h.events) != 2 || h.events[0].Kind != wire.EvReleased || h.events[1].Kind != wire.EvAcquired {
		t.Fatalf("events %v", kinds)
	}
	g := h.events[1]
	if g.Cause != wire.CauseHandOff || g.Client != 5 || g.Seq != 9 || g.Token != r.Grants[0].Token || g.Lease != 2 {
		t.Fatalf("hand-off event %+v", g)
	}
	if h.events[0].Rev >= g.Rev || h.events[0].Cause != wire.CauseReleased {
		t.Fatalf("revisions or cause wrong: %+v", h.events[0])
	}
}

func TestCancel(t *testing.T) {
	t.Run("queued waiter leaves nothing behind and unblocks others", func(t *testing.T) {
		h := newHarness(t)
		h.mustOK(acq("/l/a", sh, 1, "o"))
		h.expect(wait(with(acq("/l/a", ex, 2, "p"), 4, 1)), wire.Queued)
		h.expect(wait(with(acq("/l/a", sh, 3, "q"), 5, 1)), wire.Queued)
		r := h.mustOK(cancelReq(4, 1))
		if !equalSeqs(grantSeqs(r), []uint64{1}) || r.Grants[0].Client != 5 {
			t.Fatalf("cancel should hand the shared waiter the lock, got %+v", r.Grants)
		}
		if h.sm.stats().Waiters != 0 {
			t.Fatal("waiters remain")
		}
		h.expect(with(acq("/l/a", ex, 2, "p"), 4, 1), wire.Cancelled) // the retry learns it was cancelled
	})
	t.Run("already granted answers the grant", func(t *testing.T) {
		h := newHarness(t)
		a := h.mustOK(acq("/l/a", ex, 1, "o"))
		h.expect(wait(with(acq("/l/a", ex, 2, "p"), 4, 1)), wire.Queued)
		g := h.mustOK(rel("/l/a", a.Token)).Grants[0]
		c := h.mustOK(cancelReq(4, 1))
		if c.Token != g.Token || c.Lease != 2 {
			t.Fatalf("cancel after grant answered token %d lease %d, want %d, 2", c.Token, c.Lease, g.Token)
		}
	})
	t.Run("unknown without a path is not found", func(t *testing.T) {
		h := newHarness(t)
		h.expect(cancelReq(4, 1), wire.NotFound)
	})
	t.Run("withdrawn before it arrives, the acquire takes nothing", func(t *testing.T) {
		// A leader change can leave an acquire in flight (a router's retry,
		// an entry the new leader commits) when its withdrawal is applied.
		h := newHarness(t)
		c := cancelReq(4, 1)
		c.Path, c.Lease = "/l/a", 2 // the acquire's path and lease
		if r := h.mustOK(c); r.Token != 0 {
			t.Fatalf("withdrawal of an unseen acquire answered token %d", r.Token)
		}
		h.expect(with(acq("/l/a", ex, 2, "p"), 4, 1), wire.Cancelled)
		h.expect(wait(with(acq("/l/a", ex, 2, "p"), 4, 1)), wire.Cancelled)
		h.expect(with(acq("/l/a", ex, 3, "p"), 4, 1), wire.SeqReused) // another request under that Seq
		if info := lockInfo(h, "/l/a"); len(info.Holders)+len(info.Waiters) != 0 {
			t.Fatalf("the withdrawn acquire left %+v", info)
		}
		h.mustOK(c) // idempotent
		h.mustOK(with(acq("/l/a", ex, 2, "p"), 4, 2))
	})
	t.Run("below the floor there is nothing to withdraw", func(t *testing.T) {
		h := newHarness(t)
		r := with(acq("/l/b", ex, 2, "p"), 4, 5)
		r.AckSeq = 5
		h.mustOK(r)
		c := cancelReq(4, 3)
		c.Path = "/l/a"
		h.mustOK(c)
		h.expect(with(acq("/l/a", ex, 2, "p"), 4, 3), wire.Ambiguous) // forgotten, not applied
		if info := lockInfo(h, "/l/a"); len(info.Holders) != 0 {
			t.Fatalf("a request under the floor took %+v", info.Holders)
		}
	})
	t.Run("a granted try answers its token", func(t *testing.T) {
		h := newHarness(t)
		a := h.mustOK(with(acq("/l/a", ex, 2, "p"), 4, 1))
		c := cancelReq(4, 1)
		c.Path = "/l/a"
		if r := h.mustOK(c); r.Token != a.Token {
			t.Fatalf("cancel of a granted try answered token %d, want %d", r.Token, a.Token)
		}
	})
	t.Run("a granted multi-lock answers the holds it still has", func(t *testing.T) {
		h := newHarness(t)
		m := &wire.Request{Op: wire.OpAcquireMulti, Path: "/l/a", Paths: []string{"/l/a", "/l/b"}, Lease: 2, Owner: "p", TTL: 5000}
		got := h.mustOK(with(m, 4, 1))
		h.mustOK(rel("/l/a", got.Holders[0].Token))
		c := &wire.Request{Op: wire.OpCancel, Path: "/l/a", Paths: m.Paths, Lease: 2, Owner: "p", Client: 4, Seq: 1}
		r := h.mustOK(c)
		if len(r.Holders) != 1 || r.Holders[0].Path != "/l/b" || r.Holders[0].Token != got.Holders[1].Token {
			t.Fatalf("cancel of a granted multi-lock answered %+v, want only /l/b token %d", r.Holders, got.Holders[1].Token)
		}
		c.Lease = 3 // another lease learns nothing
		if r := h.mustOK(c); len(r.Holders) != 0 {
			t.Fatalf("a cancel naming another lease was told %+v", r.Holders)
		}
	})
}

// TestReleaseNamesWhoEndedAHold: a hold ended by a request that is not the
// holder's own (another lease or owner) says so in its EvReleased event, so
// the holder can be told; the holder's own release, and lease ends, do not.
func TestReleaseNamesWhoEndedAHold(t *testing.T) {
	released := func(h *harness, token uint64) wire.Event {
		t.Helper()
		for _, ev := range h.events {
			if ev.Kind == wire.EvReleased && ev.Token == token {
				return ev
			}
		}
		t.Fatalf("no release of token %d in %+v", token, h.events)
		return wire.Event{}
	}
	h := newHarness(t)
	own := h.mustOK(acq("/l/own", ex, 1, "o"))
	r := rel("/l/own", own.Token)
	r.Lease, r.Owner, r.Client, r.Seq = 1, "o", 9, 1
	h.mustOK(r)
	if ev := released(h, own.Token); ev.Client != 0 || ev.TellsHolder() {
		t.Fatalf("the holder's own release: %+v (tells holder %v)", ev, ev.TellsHolder())
	}
	other := h.mustOK(acq("/l/other", ex, 1, "o"))
	r = rel("/l/other", other.Token)
	r.Lease, r.Owner, r.Client, r.Seq = 0, "admin", 9, 2
	h.mustOK(r)
	if ev := released(h, other.Token); ev.Client != 9 || ev.Seq != 2 || !ev.TellsHolder() {
		t.Fatalf("a release by another client: %+v", ev)
	}
	forced := h.mustOK(acq("/l/forced", ex, 1, "o"))
	h.mustOK(&wire.Request{Op: wire.OpRevokeLock, Path: "/l/forced", Token: forced.Token, Flags: wire.FlagForce})
	if ev := released(h, forced.Token); ev.Cause != wire.CauseForced || !ev.TellsHolder() {
		t.Fatalf("a forced revocation: %+v", ev)
	}
	gone := h.mustOK(acq("/l/gone", ex, 1, "o"))
	h.mustOK(expire(1))
	if ev := released(h, gone.Token); ev.TellsHolder() {
		t.Fatalf("a hold ended with its lease: %+v (its lease's end tells the holder)", ev)
	}
}

func TestLeaseEndRemovesWaiters(t *testing.T) {
	for _, op := range []wire.Op{wire.OpExpire, wire.OpRevoke} {
		t.Run(op.String(), func(t *testing.T) {
			h := newHarness(t)
			a := h.mustOK(acq("/l/a", ex, 1, "o"))
			h.expect(wait(with(acq("/l/a", ex, 2, "p"), 4, 1)), wire.Queued)
			h.expect(wait(with(acq("/l/a", ex, 3, "q"), 5, 1)), wire.Queued)
			h.mustOK(&wire.Request{Op: op, Lease: 2}) // the waiter's lease ends first
			r := h.mustOK(rel("/l/a", a.Token))
			if len(r.Grants) != 1 || r.Grants[0].Client != 5 {
				t.Fatalf("the expired waiter must never be granted; grants %+v", r.Grants)
			}
			h.expect(with(acq("/l/a", ex, 2, "p"), 4, 1), wire.SessionExpired)
		})
	}
}

func TestLeaseEndReleasesAndHandsOff(t *testing.T) {
	h := newHarness(t)
	h.mustOK(acq("/l/a", ex, 1, "o"))
	h.mustOK(acq("/l/b", sh, 1, "o"))
	h.mustOK(&wire.Request{Op: wire.OpKVPut, Path: "/l/k", Lease: 1, Value: []byte("v")})
	h.expect(wait(with(acq("/l", ex, 2, "p"), 4, 1)), wire.Queued)
	h.events = nil
	r := h.mustOK(expire(1))
	if len(r.Grants) != 1 || r.Grants[0].Path != "/l" {
		t.Fatalf("grants %+v", r.Grants)
	}
	causes := map[wire.EventKind]wire.Cause{}
	for _, ev := range h.events {
		causes[ev.Kind] = ev.Cause
	}
	if causes[wire.EvReleased] != wire.CauseExpired || causes[wire.EvKVDelete] != wire.CauseExpired ||
		causes[wire.EvLeaseEnd] != wire.CauseExpired {
		t.Fatalf("events do not say the lease expired: %+v", h.events)
	}
	h.expect(acq("/l/z", ex, 1, "o"), wire.SessionExpired)
	if v, _ := h.sm.Lookup(LeaseCheck{IDs: []uint64{1, 2, 99}}); v.([]LeaseState)[0] != LeaseGone ||
		v.([]LeaseState)[1] != LeaseAlive || v.([]LeaseState)[2] != LeaseUnknown {
		t.Fatalf("lease states %v", v)
	}
	h.mustOK(expire(1)) // a second expiry is a no-op
	h.mustOK(expire(42))
}
