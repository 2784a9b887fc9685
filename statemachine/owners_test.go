package statemachine

import (
	"bytes"
	"testing"

	"github.com/wardenlock/warden/wire"
)

func as(identity string, r *wire.Request) *wire.Request { r.Identity = identity; return r }

// stateOf is the snapshot without the applied index, which every entry
// moves: equal stateOf = the entries in between changed nothing.
func stateOf(t *testing.T, s *StateMachine) []byte {
	applied := s.applied
	s.applied = 0
	defer func() { s.applied = applied }()
	return snapshot(t, s)
}

// TestLeaseBoundToCreator: with identities (auth on), a session lease
// belongs to the identity that created it. Another identity that knows the
// id cannot acquire under it, attach a key to it, reopen it, keep it alive
// or revoke it: each is Unauthorized and changes nothing. The owner can;
// the server's own requests (no identity) are not checked.
func TestLeaseBoundToCreator(t *testing.T) {
	h := newHarness(t)
	const lease = 42
	alice := func(r *wire.Request) *wire.Request { return as("alice", r) }
	bob := func(r *wire.Request) *wire.Request { return as("bob", r) }
	h.mustOK(alice(acq("/own/a", ex, lease, "o")))

	before := stateOf(t, h.sm)
	for _, tc := range []struct {
		name string
		req  *wire.Request
	}{
		{"acquire under it", bob(acq("/own/b", ex, lease, "o"))},
		{"re-enter the owner's lock", bob(acq("/own/a", ex, lease, "o"))},
		{"wait under it", bob(wait(acq("/own/a", ex, lease, "p")))},
		{"campaign under it", bob(&wire.Request{Op: wire.OpCampaign, Path: "/own/e", Lease: lease, TTL: 5000})},
		{"open it as a session", bob(&wire.Request{Op: wire.OpSession, Lease: lease, TTL: 5000})},
		{"bind a key to it", bob(&wire.Request{Op: wire.OpKVPut, Path: "/own/k", Value: []byte("v"), Lease: lease})},
		{"revoke it", bob(revoke(lease))},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp := h.do(tc.req)
			if resp.Code != wire.Unauthorized || resp.Msg == "" {
				t.Fatalf("got %v %q, want Unauthorized with a message", resp.Code, resp.Msg)
			}
			if !bytes.Equal(stateOf(t, h.sm), before) {
				t.Fatal("a refused request changed the state")
			}
		})
	}

	states := func(identity string) LeaseState {
		v, _ := h.sm.Lookup(LeaseCheck{IDs: []uint64{lease}, Identities: []string{identity}})
		return v.([]LeaseState)[0]
	}
	if got := states("bob"); got != LeaseForeign {
		t.Fatalf("bob's keepalive check: %v, want LeaseForeign", got)
	}
	if got := states("alice"); got != LeaseAlive {
		t.Fatalf("alice's keepalive check: %v, want LeaseAlive", got)
	}
	if v, _ := h.sm.Lookup(LeaseCheck{IDs: []uint64{lease}}); v.([]LeaseState)[0] != LeaseAlive {
		t.Fatal("a check without identities must not look at owners")
	}

	h.mustOK(alice(acq("/own/b", ex, lease, "o")))
	h.mustOK(alice(&wire.Request{Op: wire.OpKVPut, Path: "/own/k", Value: []byte("v"), Lease: lease}))
	h.mustOK(alice(revoke(lease)))
	if got := states("alice"); got != LeaseGone {
		t.Fatalf("after the owner's revoke: %v, want LeaseGone", got)
	}
}

// TestUnboundLeases: without identities (auth off) nothing is bound; a
// lease created without one stays open to every identity; internal
// requests (expiry) pass on a bound lease.
func TestUnboundLeases(t *testing.T) {
	h := newHarness(t)
	h.mustOK(acq("/free/a", ex, 1, "o"))
	h.mustOK(as("bob", acq("/free/b", ex, 1, "o")))
	h.mustOK(as("carol", revoke(1)))

	h.mustOK(as("alice", acq("/free/c", ex, 2, "o")))
	h.mustOK(acq("/free/d", ex, 2, "o")) // no identity: auth off on that router
	h.mustOK(expire(2))
}

// TestSingleLeaseRevokeNeedsRelease: single-lock leases are not bound, so
// with an identity they cannot be revoked by id, only released by token.
func TestSingleLeaseRevokeNeedsRelease(t *testing.T) {
	h := newHarness(t)
	g := h.mustOK(as("alice", acq("/single/a", ex, 0, "o")))
	before := stateOf(t, h.sm)
	h.expect(as("bob", revoke(g.Lease)), wire.Unauthorized)
	if !bytes.Equal(stateOf(t, h.sm), before) {
		t.Fatal("the refused revoke changed the state")
	}
	h.mustOK(revoke(g.Lease)) // no identity: auth off
}

// TestLeaseOwnersSurviveSnapshots: owners are replicated state: a replica
// restored from a snapshot refuses the same requests, and writes the same
// snapshot again.
func TestLeaseOwnersSurviveSnapshots(t *testing.T) {
	h := newHarness(t)
	h.mustOK(as("alice", acq("/snap/a", ex, 7, "o")))
	h.mustOK(as("carol", acq("/snap/c", ex, 8, "o")))
	h.mustOK(acq("/snap/u", ex, 9, "o"))
	snap := snapshot(t, h.sm)
	r := restore(t, snap)
	if !bytes.Equal(snapshot(t, r), snap) {
		t.Fatal("the restored replica writes a different snapshot")
	}
	if r.leases[7].owner != "alice" || r.leases[8].owner != "carol" || r.leases[9].owner != "" {
		t.Fatalf("owners after restore: %q %q %q", r.leases[7].owner, r.leases[8].owner, r.leases[9].owner)
	}
	h.sm = r
	h.expect(as("bob", revoke(7)), wire.Unauthorized)
	h.mustOK(as("bob", acq("/snap/v", ex, 9, "o")))
}
