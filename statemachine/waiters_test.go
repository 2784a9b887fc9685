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
	t.Run("unknown is not found", func(t *testing.T) {
		h := newHarness(t)
		h.expect(cancelReq(4, 1), wire.NotFound)
	})
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
