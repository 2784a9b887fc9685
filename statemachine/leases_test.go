package statemachine

import (
	"testing"
	"unsafe"

	"github.com/wardenlock/warden/wire"
)

func TestSingleLockLease(t *testing.T) {
	h := newHarness(t)
	h.events = nil
	a := h.mustOK(acq("/l/a", ex, 0, ""))
	if a.Lease != SingleLeaseBit|a.Token {
		t.Fatalf("lease %#x, want the single-lock bit with token %d", a.Lease, a.Token)
	}
	if h.events[0].Kind != wire.EvLease || h.events[0].TTL != 5000 || h.events[0].Lease != a.Lease {
		t.Fatalf("no lease event for the lessor: %+v", h.events)
	}
	r := h.mustOK(&wire.Request{Op: wire.OpRenew, Path: "/l/a", Token: a.Token, TTL: 9000})
	if r.TTL != 9000 {
		t.Fatalf("renew answered ttl %d", r.TTL)
	}
	infos, _ := h.sm.Lookup(LeasesQuery{})
	if li := infos.([]LeaseInfo); len(li) != 1 || li[0].TTL != 9000 || li[0].ID != a.Lease || li[0].Rev == 0 {
		t.Fatalf("leases %+v", li)
	}
	h.expect(&wire.Request{Op: wire.OpRenew, Path: "/l/a", Token: a.Token, TTL: 1}, wire.InvalidArgument)
	h.mustOK(rel("/l/a", a.Token))
	if st := h.sm.stats(); st.Leases != 0 {
		t.Fatalf("the lease outlived its lock: %+v", st)
	}
	h.expect(&wire.Request{Op: wire.OpRenew, Path: "/l/a", Token: a.Token, TTL: 5000}, wire.StaleToken)
}

func TestRenewRefusesSessionLocks(t *testing.T) {
	h := newHarness(t)
	a := h.mustOK(acq("/l/a", ex, 1, "o"))
	h.expect(&wire.Request{Op: wire.OpRenew, Path: "/l/a", Token: a.Token, TTL: 5000}, wire.InvalidArgument)
}

func TestSessionsAndTombstones(t *testing.T) {
	cfg := testConfig()
	cfg.TombstoneMs = 1000
	h := newHarnessWith(t, cfg)
	s := h.mustOK(&wire.Request{Op: wire.OpSession, Lease: 5, TTL: 3000})
	if s.Lease != 5 || s.TTL != 3000 {
		t.Fatalf("session answered %+v", s)
	}
	h.expect(&wire.Request{Op: wire.OpSession, Lease: 6, TTL: 5}, wire.InvalidArgument)
	h.mustOK(revoke(5))
	h.expect(acq("/l/a", ex, 5, "o"), wire.SessionExpired)
	h.expect(&wire.Request{Op: wire.OpKVPut, Path: "/l/k", Lease: 5}, wire.SessionExpired)
	h.now += 999
	h.expect(acq("/l/a", ex, 5, "o"), wire.SessionExpired)
	h.now += 1
	h.mustOK(acq("/l/a", ex, 5, "o")) // the tombstone aged out: the id is new again
}

func TestTimeNeverGoesBack(t *testing.T) {
	h := newHarness(t)
	h.now = 5000_000
	h.mustOK(&wire.Request{Op: wire.OpNoop})
	h.now = 10 // a new leader with a slow clock
	h.events = nil
	h.mustOK(acq("/l/a", ex, 1, "o"))
	if got := h.events[0].Time; got != 5000_000 {
		t.Fatalf("event time %d went back", got)
	}
}

// An Expire decided before a renewal was applied must not undo that
// renewal: it carries the revision the lessor last saw, and is skipped when
// the lease has been renewed since.
func TestExpireSkippedWhenRenewedSince(t *testing.T) {
	cases := []struct {
		name    string
		session bool
	}{
		{"single-lock lease", false},
		{"session lease", true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			r := acq("/a/b/c", wire.Exclusive, 0, "")
			if tc.session {
				r.Lease = 7
			}
			r.TTL = 5000
			g := h.mustOK(r)
			created := g.Rev
			if !tc.session {
				renewed := h.mustOK(&wire.Request{Op: wire.OpRenew, Path: "/a/b/c", Token: g.Token, TTL: 6000})
				stale := expire(g.Lease)
				stale.Rev = created
				h.expect(stale, wire.Conflict)
				if info := h.read(&wire.Request{Op: wire.OpLockInfo, Path: "/a/b/c"}); len(info.Holders) != 1 {
					t.Fatalf("a stale expiry released the renewed lock: %+v", info)
				}
				created = renewed.Rev
			}
			current := expire(g.Lease)
			current.Rev = created
			h.mustOK(current)
			if info := h.read(&wire.Request{Op: wire.OpLockInfo, Path: "/a/b/c"}); info.Code != wire.NotFound {
				t.Fatalf("expiry at the current revision must release: %+v", info)
			}
		})
	}
}

// TestNodeSize: a held path costs one 112-byte trie node whether its lock
// is in a session or has a lease of its own (the memory budget rests on it).
func TestNodeSize(t *testing.T) {
	if size := unsafe.Sizeof(lockNode{}); size != 112 {
		t.Fatalf("a trie node is %d bytes, want 112", size)
	}
}

func TestSingleLeaseTTLKeepsItsBits(t *testing.T) {
	var h holder
	for _, ttl := range []int64{0, 1, 1<<32 - 1, 1 << 32, 600_000, maxSingleTTL} {
		h.setSingle(ttl, 42)
		if h.singleTTL() != ttl || h.singleRev() != 42 {
			t.Fatalf("ttl %d came back as %d (rev %d)", ttl, h.singleTTL(), h.singleRev())
		}
	}
	if cfg := (Config{MaxTTL: 1 << 62}).withDefaults(); cfg.MaxTTL != maxSingleTTL {
		t.Fatalf("MaxTTL %d is not clamped", cfg.MaxTTL)
	}
}

// A deposed leader's expiry reaches the log after the new leader's term
// marker: it is refused, and the lease keeps its lock.
func TestExpireFromDeposedLeaderRefused(t *testing.T) {
	h := newHarness(t)
	r := acq("/a/b/c", wire.Exclusive, 7, "")
	r.TTL = 5000
	h.mustOK(r)
	h.mustOK(&wire.Request{Op: wire.OpNoop, Term: 4})
	stale := expire(7)
	stale.Term = 3
	h.expect(stale, wire.Conflict)
	if info := h.read(&wire.Request{Op: wire.OpLockInfo, Path: "/a/b/c"}); len(info.Holders) != 1 {
		t.Fatalf("an expiry from term 3 ended the lease after term 4 began: %+v", info)
	}
	current := expire(7)
	current.Term = 4
	h.mustOK(current)
	if info := h.read(&wire.Request{Op: wire.OpLockInfo, Path: "/a/b/c"}); info.Code != wire.NotFound {
		t.Fatalf("the current term's expiry must release: %+v", info)
	}
}
