package statemachine

import (
	"testing"

	"github.com/wardenlock/warden/wire"
)

const (
	ex = wire.Exclusive
	sh = wire.Shared
)

// TestHierarchicalConflicts: every placement (same path, parent first,
// child first, siblings) in every pair of modes, by two different owners.
func TestHierarchicalConflicts(t *testing.T) {
	cases := []struct {
		name         string
		first        string
		firstMode    wire.Mode
		second       string
		secondMode   wire.Mode
		wantConflict bool
	}{
		{"same ex then ex", "/l/a", ex, "/l/a", ex, true},
		{"same ex then sh", "/l/a", ex, "/l/a", sh, true},
		{"same sh then ex", "/l/a", sh, "/l/a", ex, true},
		{"same sh then sh", "/l/a", sh, "/l/a", sh, false},
		{"parent ex then child ex", "/l", ex, "/l/a/b", ex, true},
		{"parent ex then child sh", "/l", ex, "/l/a/b", sh, true},
		{"parent sh then child ex", "/l", sh, "/l/a/b", ex, true},
		{"parent sh then child sh", "/l", sh, "/l/a/b", sh, false},
		{"child ex then parent ex", "/l/a/b", ex, "/l", ex, true},
		{"child ex then parent sh", "/l/a/b", ex, "/l", sh, true},
		{"child sh then parent ex", "/l/a/b", sh, "/l", ex, true},
		{"child sh then parent sh", "/l/a/b", sh, "/l", sh, false},
		{"siblings ex", "/l/a", ex, "/l/b", ex, false},
		{"name prefix is no parent", "/l/a", ex, "/l/ab", ex, false},
		{"root ex covers all", "/", ex, "/l/a", sh, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			h.mustOK(acq(tc.first, tc.firstMode, 1, "alice"))
			want := wire.OK
			if tc.wantConflict {
				want = wire.Conflict
			}
			h.expect(acq(tc.second, tc.secondMode, 2, "bob"), want)
			// Single-lock leases (no session) decide the same way.
			h2 := newHarness(t)
			h2.mustOK(acq(tc.first, tc.firstMode, 0, ""))
			h2.expect(acq(tc.second, tc.secondMode, 0, ""), want)
		})
	}
}

func TestReentrancyUpgradeAndSelfConflict(t *testing.T) {
	cases := []struct {
		name  string
		setup []*wire.Request
		req   *wire.Request
		want  wire.Code
		count uint32
		same  bool // same token as the first grant
	}{
		{"exclusive again is reentrant", nil, acq("/l/a", ex, 1, "o"), wire.OK, 2, true},
		{"shared under exclusive is reentrant", nil, acq("/l/a", sh, 1, "o"), wire.OK, 2, true},
		{"other owner same lease conflicts", nil, acq("/l/a", ex, 1, "p"), wire.Conflict, 0, false},
		{"child of own lock is self conflict", nil, acq("/l/a/b", sh, 1, "o"), wire.SelfConflict, 0, false},
		{"parent of own lock is self conflict", nil, acq("/l", ex, 1, "o"), wire.SelfConflict, 0, false},
		{"waiting on own child still self conflict", nil, wait(acq("/l", ex, 1, "o")), wire.SelfConflict, 0, false},
		{"own and foreign conflicts queue", []*wire.Request{acq("/l/b", sh, 2, "q")},
			wait(acq("/l", ex, 1, "o")), wire.Queued, 0, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			first := h.mustOK(acq("/l/a", ex, 1, "o"))
			for _, r := range tc.setup {
				h.mustOK(r)
			}
			got := h.expect(tc.req, tc.want)
			if got.Count != tc.count || (tc.same && got.Token != first.Token) {
				t.Fatalf("count %d token %d, want count %d (same token %v as %d)", got.Count, got.Token, tc.count, tc.same, first.Token)
			}
		})
	}
}

func TestReleaseUndoesOneHold(t *testing.T) {
	h := newHarness(t)
	a := h.mustOK(acq("/l/a", ex, 1, "o"))
	h.mustOK(acq("/l/a", ex, 1, "o"))
	if r := h.mustOK(rel("/l/a", a.Token)); r.Count != 1 {
		t.Fatalf("after one release count = %d, want 1", r.Count)
	}
	h.expect(acq("/l/a", ex, 2, "p"), wire.Conflict)
	h.mustOK(rel("/l/a", a.Token))
	h.mustOK(acq("/l/a", ex, 2, "p"))
}

func TestUpgrade(t *testing.T) {
	t.Run("sole shared holder upgrades with a new token", func(t *testing.T) {
		h := newHarness(t)
		s := h.mustOK(acq("/l/a", sh, 1, "o"))
		u := h.mustOK(acq("/l/a", ex, 1, "o"))
		if u.Token <= s.Token || u.Mode != ex {
			t.Fatalf("upgrade gave token %d mode %v (shared token %d)", u.Token, u.Mode, s.Token)
		}
		h.expect(acq("/l/a", sh, 2, "p"), wire.Conflict)
		h.expect(rel("/l/a", s.Token), wire.StaleToken)
	})
	t.Run("with another shared holder it is refused, never queued", func(t *testing.T) {
		h := newHarness(t)
		h.mustOK(acq("/l/a", sh, 1, "o"))
		h.mustOK(acq("/l/a", sh, 2, "p"))
		h.expect(wait(acq("/l/a", ex, 1, "o")), wire.UpgradeConflict)
	})
	t.Run("a shared holder below blocks the upgrade", func(t *testing.T) {
		h := newHarness(t)
		h.mustOK(acq("/l", sh, 1, "o"))
		h.mustOK(acq("/l/x", sh, 2, "p"))
		h.expect(acq("/l", ex, 1, "o"), wire.UpgradeConflict)
	})
}

func TestFencingTokens(t *testing.T) {
	h := newHarness(t)
	var last uint64
	for i := 0; i < 5; i++ {
		r := h.mustOK(acq("/l/a", ex, 0, ""))
		if r.Token <= last || r.Token == 0 {
			t.Fatalf("token %d after %d", r.Token, last)
		}
		last = r.Token
		h.mustOK(rel("/l/a", r.Token))
	}
	h.mustOK(&wire.Request{Op: wire.OpRaiseFence, Token: 1000})
	h.mustOK(&wire.Request{Op: wire.OpRaiseFence, Token: 10}) // never lowers
	if r := h.mustOK(acq("/l/a", ex, 0, "")); r.Token != 1001 {
		t.Fatalf("token after raising the floor to 1000 = %d, want 1001", r.Token)
	}
	h.expect(rel("/l/a", 999), wire.StaleToken)
	h.expect(rel("/l/a", 5000), wire.NotHolder)
}

func TestReleaseErrors(t *testing.T) {
	h := newHarness(t)
	a := h.mustOK(acq("/l/a", ex, 1, "o"))
	cases := []struct {
		name string
		req  *wire.Request
		want wire.Code
	}{
		{"wrong path", rel("/l/b", a.Token), wire.StaleToken},
		{"zero token", rel("/l/a", 0), wire.NotHolder},
		{"future token", rel("/l/a", a.Token+100), wire.NotHolder},
		{"bad path", rel("/l//a", a.Token), wire.InvalidArgument},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) { h.expect(tc.req, tc.want) })
	}
}

func TestBadInputIsRefused(t *testing.T) {
	big := make([]byte, 5000)
	cases := []struct {
		name string
		req  *wire.Request
		want wire.Code
	}{
		{"bad mode", &wire.Request{Op: wire.OpAcquire, Path: "/l/a", Mode: 9, Lease: 1, TTL: 5000}, wire.InvalidArgument},
		{"relative path", acq("l/a", ex, 1, "o"), wire.InvalidArgument},
		{"dotdot", acq("/l/../a", ex, 1, "o"), wire.InvalidArgument},
		{"ttl too short", &wire.Request{Op: wire.OpAcquire, Path: "/l/a", TTL: 10}, wire.InvalidArgument},
		{"ttl too long", &wire.Request{Op: wire.OpAcquire, Path: "/l/a", TTL: 700_000}, wire.InvalidArgument},
		{"single-lock bit in a session id", acq("/l/a", ex, SingleLeaseBit|5, "o"), wire.InvalidArgument},
		{"unknown op", &wire.Request{Op: 77}, wire.UnknownOp},
		{"read op in the log", &wire.Request{Op: wire.OpLockInfo, Path: "/l/a"}, wire.UnknownOp},
		{"keepalive in the log", &wire.Request{Op: wire.OpKeepAlive, Lease: 1}, wire.UnknownOp},
		{"oversize kv value", &wire.Request{Op: wire.OpKVPut, Path: "/l/k", Value: big}, wire.TooLarge},
		{"oversize campaign value", &wire.Request{Op: wire.OpCampaign, Path: "/l/e", Lease: 1, TTL: 5000, Value: big}, wire.TooLarge},
		{"session without id", &wire.Request{Op: wire.OpSession, TTL: 5000}, wire.InvalidArgument},
		{"expire without id", &wire.Request{Op: wire.OpExpire}, wire.InvalidArgument},
		{"overlapping ranges", &wire.Request{Op: wire.OpSetRanges, Gen: 5, Ranges: []wire.Range{
			{Start: "", End: "m", Shard: 7}, {Start: "k", End: "", Shard: 7}}}, wire.InvalidArgument},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			h.expect(tc.req, tc.want)
			if st := h.sm.stats(); st.Locks != 0 || st.KVs != 0 {
				t.Fatalf("a refused op left state behind: %+v", st)
			}
		})
	}
}

func TestLimits(t *testing.T) {
	cfg := testConfig()
	cfg.MaxWaiters = 2
	cfg.MaxLeaseLock = 3
	h := newHarnessWith(t, cfg)
	h.mustOK(acq("/l/a", ex, 1, "o"))
	h.expect(wait(acq("/l/a", ex, 2, "p")), wire.Queued)
	h.expect(wait(acq("/l/a", ex, 3, "q")), wire.Queued)
	h.expect(wait(acq("/l/a", ex, 4, "r")), wire.TooMany)
	h.mustOK(acq("/l/b", ex, 1, "o"))
	h.mustOK(acq("/l/c", ex, 1, "o"))
	h.expect(acq("/l/d", ex, 1, "o"), wire.TooMany)
}
