package statemachine

import (
	"bytes"
	"sync"
	"testing"

	"github.com/wardenlock/warden/wire"
)

// testKeys holds the keys of the lease ids made by keyedLease.
var testKeys sync.Map

// keyedLease is the session lease id that key proves (wire.LeaseID); as
// sends the key along with requests under that lease, as a client does.
func keyedLease(key uint64) uint64 {
	id := wire.LeaseID(key)
	testKeys.Store(id, key)
	return id
}

// as sends r as identity, with the key of r's lease when it was made by
// keyedLease (a lease id without a key cannot be created with an identity).
func as(identity string, r *wire.Request) *wire.Request {
	r.Identity = identity
	if k, ok := testKeys.Load(r.Lease); ok {
		r.LeaseKey = k.(uint64)
	}
	return r
}

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
	lease := keyedLease(42)
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

	two := keyedLease(2)
	h.mustOK(as("alice", acq("/free/c", ex, two, "o")))
	h.mustOK(acq("/free/d", ex, two, "o")) // no identity: auth off on that router
	h.mustOK(expire(two))
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
	seven, eight := keyedLease(7), keyedLease(8)
	h.mustOK(as("alice", acq("/snap/a", ex, seven, "o")))
	h.mustOK(as("carol", acq("/snap/c", ex, eight, "o")))
	h.mustOK(acq("/snap/u", ex, 9, "o"))
	single := h.mustOK(as("alice", acq("/snap/s", ex, 0, "o")))
	h.expect(as("carol", wait(acq("/snap/s", ex, 0, "q"))), wire.Queued)
	snap := snapshot(t, h.sm)
	r := restore(t, snap)
	if !bytes.Equal(snapshot(t, r), snap) {
		t.Fatal("the restored replica writes a different snapshot")
	}
	if r.leases[seven].owner != "alice" || r.leases[eight].owner != "carol" || r.leases[9].owner != "" {
		t.Fatalf("owners after restore: %q %q %q", r.leases[seven].owner, r.leases[eight].owner, r.leases[9].owner)
	}
	if r.singleOwn[single.Token] != "alice" || len(r.waitOwn) != 1 {
		t.Fatalf("single-lock owners after restore: %v, queued %v", r.singleOwn, r.waitOwn)
	}
	h.sm = r
	h.expect(as("bob", revoke(seven)), wire.Unauthorized)
	h.mustOK(as("bob", acq("/snap/v", ex, 9, "o")))
	h.expect(as("bob", rel("/snap/s", single.Token)), wire.Unauthorized)
	h.mustOK(as("alice", rel("/snap/s", single.Token)))
	info := lockInfo(h, "/snap/s")
	if len(info.Holders) != 1 || h.sm.singleOwn[info.Holders[0].Token] != "carol" {
		t.Fatalf("carol's queued single-lock acquire, granted after the restore: %+v, owners %v", info.Holders, h.sm.singleOwn)
	}
}

// TestLeaseSquatRefused: an identity that learned a lease id (from a lock's
// holders on one shard) cannot open it first on a shard where its owner has
// not used it yet: without the lease's key, or with a wrong one, creating
// it is Unauthorized and changes nothing, and the owner's first use there
// (with the key) binds it to the owner as before.
func TestLeaseSquatRefused(t *testing.T) {
	used, fresh := newHarness(t), newHarness(t)
	const key = 0x5eed
	lease := wire.LeaseID(key)
	owner := func(r *wire.Request) *wire.Request { r.Identity, r.LeaseKey = "alice", key; return r }
	used.mustOK(owner(acq("/sq/a", ex, lease, "o")))

	before := stateOf(t, fresh.sm)
	for _, tc := range []struct {
		name string
		req  *wire.Request
	}{
		{"acquire", acq("/sq/b", ex, lease, "o")},
		{"wait", wait(acq("/sq/b", ex, lease, "o"))},
		{"campaign", &wire.Request{Op: wire.OpCampaign, Path: "/sq/e", Lease: lease, TTL: 5000}},
		{"open it as a session", &wire.Request{Op: wire.OpSession, Lease: lease, TTL: 5000}},
		{"bind a key to it", &wire.Request{Op: wire.OpKVPut, Path: "/sq/k", Value: []byte("v"), Lease: lease}},
		{"multi-lock", &wire.Request{Op: wire.OpAcquireMulti, Path: "/sq/m", Paths: []string{"/sq/m"}, Lease: lease, TTL: 5000}},
	} {
		for _, guess := range []uint64{0, key + 1, lease} {
			r := *tc.req
			r.Identity, r.LeaseKey = "bob", guess
			resp := fresh.do(&r)
			if resp.Code != wire.Unauthorized || resp.Msg == "" {
				t.Fatalf("%s with key %#x: got %v %q, want Unauthorized with a message", tc.name, guess, resp.Code, resp.Msg)
			}
			if !bytes.Equal(stateOf(t, fresh.sm), before) {
				t.Fatalf("%s with key %#x: the refused squat changed the state", tc.name, guess)
			}
		}
	}
	// The owner's key also does not help anyone else once the lease exists.
	fresh.mustOK(owner(acq("/sq/b", ex, lease, "o")))
	if got := fresh.sm.leases[lease].owner; got != "alice" {
		t.Fatalf("lease bound to %q, want alice", got)
	}
	stolen := acq("/sq/c", ex, lease, "o")
	stolen.Identity, stolen.LeaseKey = "bob", key
	fresh.expect(stolen, wire.Unauthorized)
	// Without identities (auth off) ids are created as before, key or not.
	fresh.mustOK(acq("/sq/d", ex, 77, "o"))
}

// TestSingleLeaseBoundToCreator: with identities, a single-lock lease (an
// acquire without a session) belongs to the identity that acquired it, and
// a session lock to its lease's owner. Another identity that holds the
// token cannot release, renew, resign, proclaim or hand it over: each is
// Unauthorized and changes nothing. A queued single-lock acquire is bound
// to its own identity when it is granted. Without identities nothing is
// checked.
func TestSingleLeaseBoundToCreator(t *testing.T) {
	h := newHarness(t)
	g := h.mustOK(as("alice", acq("/one/a", ex, 0, "o")))
	h.expect(as("carol", wait(acq("/one/a", ex, 0, "q"))), wire.Queued)
	sess := keyedLease(0xa11ce)
	sg := h.mustOK(as("alice", acq("/one/s", ex, sess, "o")))
	el := h.mustOK(as("alice", &wire.Request{Op: wire.OpCampaign, Path: "/one/e", TTL: 5000}))

	before := stateOf(t, h.sm)
	for _, tc := range []struct {
		name string
		req  *wire.Request
	}{
		{"release", rel("/one/a", g.Token)},
		{"renew", &wire.Request{Op: wire.OpRenew, Path: "/one/a", Token: g.Token, TTL: 9000}},
		{"release a session lock", rel("/one/s", sg.Token)},
		{"resign", &wire.Request{Op: wire.OpResign, Path: "/one/e", Token: el.Token}},
		{"proclaim", &wire.Request{Op: wire.OpProclaim, Path: "/one/e", Token: el.Token, Value: []byte("x")}},
		{"hand over", &wire.Request{Op: wire.OpHandOver, Path: "/one/e", Token: el.Token, Target: "q"}},
		{"revoke by id", revoke(g.Lease)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp := h.do(as("bob", tc.req))
			if resp.Code != wire.Unauthorized || resp.Msg == "" {
				t.Fatalf("got %v %q, want Unauthorized with a message", resp.Code, resp.Msg)
			}
			if !bytes.Equal(stateOf(t, h.sm), before) {
				t.Fatal("a refused request changed the state")
			}
		})
	}
	h.mustOK(as("alice", &wire.Request{Op: wire.OpRenew, Path: "/one/a", Token: g.Token, TTL: 9000}))
	h.mustOK(as("alice", rel("/one/a", g.Token)))
	info := lockInfo(h, "/one/a")
	if len(info.Holders) != 1 || info.Holders[0].Owner != "q" {
		t.Fatalf("carol's waiter after alice's release: %+v", info.Holders)
	}
	carols := info.Holders[0].Token
	h.expect(as("alice", rel("/one/a", carols)), wire.Unauthorized)
	h.mustOK(as("carol", rel("/one/a", carols)))
	if len(h.sm.singleOwn) != 1 || len(h.sm.waitOwn) != 0 {
		t.Fatalf("owners left: singles %v, queued %v (want only the election's)", h.sm.singleOwn, h.sm.waitOwn)
	}
	// Auth off (no identity): the token alone is enough, as before.
	h.mustOK(rel("/one/e", el.Token))
	u := h.mustOK(acq("/one/u", ex, 0, "o"))
	h.mustOK(as("bob", rel("/one/u", u.Token)))
}
