package statemachine

import (
	"bytes"
	"testing"

	"github.com/wardenlock/warden/wire"
)

// TestSeqReusedGetsItsOwnError: a (Client, Seq) names one request. A
// request that reuses it for another op, path or lease is answered
// SeqReused, never the first request's outcome (a session's record must not
// answer an acquire OK with token 0 while the path stays free), and the
// first request's record is untouched: its own retry still gets its grant.
func TestSeqReusedGetsItsOwnError(t *testing.T) {
	h := newHarness(t)
	first := h.mustOK(with(acq("/l/a", ex, 1, "o"), 3, 1))
	for _, tc := range []struct {
		name string
		req  *wire.Request
	}{
		{"another op", with(&wire.Request{Op: wire.OpSession, Lease: 1, TTL: 5000}, 3, 1)},
		{"another path", with(acq("/l/b", ex, 1, "o"), 3, 1)},
		{"another lease", with(acq("/l/a", ex, 2, "o"), 3, 1)},
		{"a release", with(rel("/l/a", first.Token), 3, 1)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := stateOf(t, h.sm)
			if r := h.do(tc.req); r.Code != wire.SeqReused || r.Token != 0 || r.Msg == "" {
				t.Fatalf("got %v token %d %q, want SeqReused with a message and no token", r.Code, r.Token, r.Msg)
			}
			if !bytes.Equal(stateOf(t, h.sm), before) {
				t.Fatal("a refused reuse changed the state")
			}
		})
	}
	if r := h.mustOK(with(acq("/l/a", ex, 1, "o"), 3, 1)); r.Token != first.Token || r.Count != 1 {
		t.Fatalf("the first request's retry answered token %d count %d, want %d count 1", r.Token, r.Count, first.Token)
	}
	// The other way round: a session recorded first, then an acquire that
	// reuses its Seq gets SeqReused, not OK with token 0.
	h.mustOK(with(&wire.Request{Op: wire.OpSession, Lease: 9, TTL: 5000}, 4, 1))
	if r := h.do(with(acq("/l/c", ex, 9, "o"), 4, 1)); r.Code != wire.SeqReused {
		t.Fatalf("acquire reusing a session's Seq: %v token %d, want SeqReused", r.Code, r.Token)
	}
	if info := lockInfo(h, "/l/c"); len(info.Holders) != 0 {
		t.Fatalf("the path was taken: %+v", info.Holders)
	}
}

// TestAckSeqAboveANewRequestIsRefused: AckSeq says every Seq below it is
// finished, so a new request carrying an AckSeq above its own Seq is
// nonsense: InvalidArgument, and the client's floor does not move. A retry
// of a queued request may carry a higher AckSeq (dedup_test covers it).
func TestAckSeqAboveANewRequestIsRefused(t *testing.T) {
	h := newHarness(t)
	h.mustOK(with(acq("/l/a", ex, 1, "o"), 3, 1))
	r := with(acq("/l/b", ex, 1, "o"), 3, 2)
	r.AckSeq = 1 << 62
	before := stateOf(t, h.sm)
	if got := h.do(r); got.Code != wire.InvalidArgument || got.Msg == "" {
		t.Fatalf("got %v %q, want InvalidArgument", got.Code, got.Msg)
	}
	if !bytes.Equal(stateOf(t, h.sm), before) {
		t.Fatal("the refused request changed the state")
	}
	if got := h.mustOK(with(acq("/l/a", ex, 1, "o"), 3, 1)); got.Token == 0 {
		t.Fatal("the floor moved: seq 1's record is gone")
	}
	// A jump to Seq = AckSeq = 2^62 is the client's own business: its later
	// smaller Seqs are told the floor they fell under.
	jump := with(acq("/l/j", ex, 1, "o"), 3, 1<<62)
	jump.AckSeq = 1 << 62
	h.mustOK(jump)
	if got := h.expect(with(acq("/l/k", ex, 1, "o"), 3, 5), wire.Ambiguous); !bytes.Contains([]byte(got.Msg), []byte("floor 4611686018427387904")) {
		t.Fatalf("the Ambiguous answer does not name the floor: %q", got.Msg)
	}
	h.mustOK(with(acq("/l/k", ex, 1, "o"), 4, 5)) // another client: untouched
}

// TestRecordSumsSurviveSnapshotsAndMoves: the record of what a request
// was travels with it: after a snapshot recovery and after a range move,
// a reuse of its Seq is still refused and its retry still answered.
func TestRecordSumsSurviveSnapshotsAndMoves(t *testing.T) {
	src, dst := twoShards(t)
	src.mustOK(&wire.Request{Op: wire.OpSession, Lease: 5, TTL: 10_000})
	first := src.mustOK(with(acq("/a/x/job", ex, 5, "o"), 1, 1))
	src.expect(with(wait(acq("/a/x/job", ex, 5, "p")), 1, 2), wire.Queued)
	check := func(h *harness) {
		t.Helper()
		h.expect(with(acq("/a/x/other", ex, 5, "o"), 1, 1), wire.SeqReused)
		h.expect(with(wait(acq("/a/x/other", ex, 5, "p")), 1, 2), wire.SeqReused)
		if r := h.mustOK(with(acq("/a/x/job", ex, 5, "o"), 1, 1)); r.Token != first.Token {
			t.Fatalf("retry answered token %d, want %d", r.Token, first.Token)
		}
		h.expect(with(wait(acq("/a/x/job", ex, 5, "p")), 1, 2), wire.Queued)
	}
	recovered := New(testConfig())
	if err := recovered.RecoverFromSnapshot(bytes.NewReader(snapshot(t, src.sm)), nil, nil); err != nil {
		t.Fatal(err)
	}
	check(&harness{t: t, sm: recovered, now: src.now, index: src.index})
	moveAll(t, src, dst, 1<<20)
	check(dst)
}

// TestRefusedRequestsLeaveNoLease: a refused acquire, campaign, multi-lock
// or put under a new session lease leaves no lease behind: a flood of
// refused acquires makes no leases.
func TestRefusedRequestsLeaveNoLease(t *testing.T) {
	h := newHarness(t)
	h.mustOK(acq("/l/a", ex, 1, "o"))
	h.mustOK(&wire.Request{Op: wire.OpKVPut, Path: "/l/k", Value: []byte("v")})
	before := stateOf(t, h.sm)
	for i, req := range []*wire.Request{
		acq("/l/a", ex, 50, "p"),
		acq("/l/a", ex, 0, "p"), // a single-lock acquire makes its lease only when granted
		{Op: wire.OpCampaign, Path: "/l/a", Lease: 51, TTL: 5000},
		{Op: wire.OpAcquireMulti, Paths: []string{"/l/b", "/l/a"}, Lease: 52, TTL: 5000},
		{Op: wire.OpKVPut, Path: "/l/k", Value: []byte("w"), Lease: 53, TTL: 5000, Flags: wire.FlagHasExpect, Version: 7},
	} {
		if r := h.do(req); r.Code == wire.OK || r.Code == wire.Queued {
			t.Fatalf("request %d: %v, want a refusal", i, r.Code)
		}
		if !bytes.Equal(stateOf(t, h.sm), before) {
			t.Fatalf("refused request %d (%v) changed the state: %d leases", i, req.Op, len(h.sm.leases))
		}
	}
}

func quotaHarness(t *testing.T) *harness {
	cfg := testConfig()
	cfg.MaxOwnerLeases, cfg.MaxOwnerLocks, cfg.MaxOwnerWaiters = 3, 4, 2
	return newHarnessWith(t, cfg)
}

// TestOwnerQuotas: an identity's leases, locks and queued requests on a
// shard are bounded; the request over a quota is TooMany and changes
// nothing, other identities are not affected, and what is given back can
// be taken again.
func TestOwnerQuotas(t *testing.T) {
	h := quotaHarness(t)
	alice := func(r *wire.Request) *wire.Request { return as("alice", r) }
	refused := func(r *wire.Request) {
		t.Helper()
		before := stateOf(t, h.sm)
		if got := h.do(r); got.Code != wire.TooMany || got.Msg == "" {
			t.Fatalf("%v %s: got %v %q, want TooMany", r.Op, r.Path, got.Code, got.Msg)
		}
		if !bytes.Equal(stateOf(t, h.sm), before) {
			t.Fatalf("%v %s: a refused request changed the state", r.Op, r.Path)
		}
	}
	l1, l2, l3, l4 := keyedLease(101), keyedLease(102), keyedLease(103), keyedLease(104)
	// Leases: two sessions and a single-lock lease fill the quota of 3.
	h.mustOK(alice(&wire.Request{Op: wire.OpSession, Lease: l1, TTL: 5000}))
	h.mustOK(alice(&wire.Request{Op: wire.OpSession, Lease: l2, TTL: 5000}))
	single := h.mustOK(alice(acq("/q/s", ex, 0, "o")))
	refused(alice(&wire.Request{Op: wire.OpSession, Lease: l3, TTL: 5000}))
	refused(alice(acq("/q/t", ex, 0, "o")))
	refused(alice(acq("/q/t", ex, l4, "o")))
	h.mustOK(as("bob", &wire.Request{Op: wire.OpSession, Lease: l3, TTL: 5000})) // another identity
	// Locks: the single holds one; three more under l1 reach 4.
	h.mustOK(alice(acq("/q/a", ex, l1, "o")))
	h.mustOK(alice(acq("/q/b", ex, l1, "o")))
	h.mustOK(alice(acq("/q/a", ex, l1, "o"))) // re-entry takes no new lock
	blocker := h.mustOK(as("bob", acq("/q/w", ex, l3, "o")))
	h.expect(alice(wait(acq("/q/w", ex, l1, "o"))), wire.Queued) // a queued request counts as a lock
	refused(alice(acq("/q/c", ex, l2, "o")))
	refused(alice(wait(acq("/q/w", ex, l2, "p"))))
	refused(alice(&wire.Request{Op: wire.OpAcquireMulti, Paths: []string{"/q/m1"}, Lease: l2, TTL: 5000}))
	// Giving one back makes room.
	h.mustOK(alice(rel("/q/s", single.Token)))
	h.mustOK(alice(acq("/q/c", ex, l2, "o")))
	// Waiters: the quota of 2 queued requests.
	h.mustOK(alice(rel("/q/c", lockInfo(h, "/q/c").Holders[0].Token)))
	h.mustOK(alice(rel("/q/b", lockInfo(h, "/q/b").Holders[0].Token)))
	h.expect(alice(wait(acq("/q/w", ex, l2, "p"))), wire.Queued)
	refused(alice(wait(acq("/q/w", ex, l2, "q"))))
	// A hand-off turns a queued request into a hold: the counts stay in
	// step (checked against a recount below).
	h.mustOK(as("bob", rel("/q/w", blocker.Token)))

	counts := *h.sm.tenants["alice"]
	recovered := New(h.sm.cfg)
	if err := recovered.RecoverFromSnapshot(bytes.NewReader(snapshot(t, h.sm)), nil, nil); err != nil {
		t.Fatal(err)
	}
	if got := *recovered.tenants["alice"]; got != counts {
		t.Fatalf("recounted after recovery %+v, counted as applied %+v", got, counts)
	}
	h.sm.recountTenants()
	if got := *h.sm.tenants["alice"]; got != counts {
		t.Fatalf("recounted %+v, counted as applied %+v", got, counts)
	}
	h.mustOK(alice(revoke(l1)))
	h.mustOK(alice(revoke(l2)))
	if got := *h.sm.tenants["alice"]; got.leaseCount()+got.holds+got.waiters != 0 {
		t.Fatalf("after ending everything alice still counts %+v", got)
	}
}
