package statemachine

import (
	"bytes"
	"testing"

	"github.com/wardenlock/warden/wire"
)

// TestPrecheck: the read-only pre-proposal check refuses exactly what apply
// would refuse for a limit (locks per lease, waiters per lock), lets through
// what apply would accept or refuse for another reason, and changes nothing.
func TestPrecheck(t *testing.T) {
	cfg := testConfig()
	cfg.MaxWaiters = 2
	cfg.MaxLeaseLock = 3
	h := newHarnessWith(t, cfg)
	if h.sm.Crowded() {
		t.Fatal("an empty replica is crowded")
	}
	h.mustOK(acq("/p/a", ex, 1, "o"))
	h.expect(wait(acq("/p/a", ex, 2, "p")), wire.Queued)
	h.expect(wait(acq("/p/a", ex, 3, "q")), wire.Queued)
	h.mustOK(acq("/p/b", ex, 1, "o"))
	h.mustOK(acq("/p/c", ex, 1, "o"))
	if !h.sm.Crowded() {
		t.Fatal("a lease at its limit did not mark the replica crowded")
	}
	check := func(r *wire.Request) *wire.Error {
		v, err := h.sm.Lookup(LimitCheck{Req: r})
		if err != nil {
			t.Fatal(err)
		}
		return v.(LimitResult).Err
	}
	before := stateOf(t, h.sm)
	for _, tc := range []struct {
		name    string
		req     *wire.Request
		tooMany bool
	}{
		{"lock over the lease's limit", acq("/p/d", ex, 1, "o"), true},
		{"campaign over the lease's limit", &wire.Request{Op: wire.OpCampaign, Path: "/p/e", Lease: 1, TTL: 5000}, true},
		{"waiter over the lock's limit", wait(acq("/p/a", ex, 4, "r")), true},
		{"re-entry at the lease's limit", acq("/p/b", ex, 1, "o"), false},
		{"try-lock on a full queue (a conflict, not a limit)", acq("/p/a", ex, 5, "s"), false},
		{"another lease, another path", acq("/p/f", ex, 6, "t"), false},
		{"single-lock lease", acq("/p/g", ex, 0, "u"), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := check(tc.req)
			if (err != nil) != tc.tooMany || err != nil && (err.Code != wire.TooMany || err.Detail == "") {
				t.Fatalf("precheck %v, want TooMany=%v", err, tc.tooMany)
			}
			if !bytes.Equal(stateOf(t, h.sm), before) {
				t.Fatal("the check changed the state")
			}
			if tc.tooMany { // apply, the authority, agrees
				h.expect(tc.req, wire.TooMany)
				before = stateOf(t, h.sm) // (it may have opened the request's session lease)
			}
		})
	}
	if err := check(&wire.Request{Op: wire.OpKVPut, Path: "/p/k", Lease: 1}); err != nil {
		t.Fatalf("precheck of a non-lock op: %v", err)
	}
}

// TestPrecheckLetsRetriesThrough (found by FuzzApply, corpus entry
// f07a37406f94ab53): a client re-sending its queued acquire with the same
// (Client, Seq), on a path whose queue is now full, is answered from its
// record by apply (Queued: it re-attaches) and takes no new slot, so the
// pre-proposal check must not refuse it as TooMany.
func TestPrecheckLetsRetriesThrough(t *testing.T) {
	cfg := testConfig()
	cfg.MaxWaiters = 2
	h := newHarnessWith(t, cfg)
	h.mustOK(acq("/r/a", ex, 1, "o"))
	h.expect(with(wait(acq("/r/a", ex, 2, "p")), 7, 1), wire.Queued)
	h.expect(wait(acq("/r/a", ex, 3, "q")), wire.Queued)
	retry := with(wait(acq("/r/a", ex, 2, "p")), 7, 1)
	v, err := h.sm.Lookup(LimitCheck{Req: retry})
	if err != nil {
		t.Fatal(err)
	}
	if got := v.(LimitResult).Err; got != nil {
		t.Fatalf("precheck refused a retry of a queued acquire: %v", got)
	}
	h.expect(retry, wire.Queued)
	fresh := wait(acq("/r/a", ex, 4, "s"))
	if v, _ := h.sm.Lookup(LimitCheck{Req: fresh}); v.(LimitResult).Err == nil || v.(LimitResult).Err.Code != wire.TooMany {
		t.Fatalf("a new waiter on a full queue: precheck %v, want TooMany", v.(LimitResult).Err)
	}
}
