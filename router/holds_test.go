package router

import (
	"testing"
	"time"

	"github.com/wardenlock/warden/wire"
)

// pushed decodes the frames queued on c (without a socket, nothing takes
// them off) and returns their events.
func pushed(t *testing.T, c *conn) []wire.Event {
	t.Helper()
	c.mu.Lock()
	out := c.out
	c.out = nil
	c.mu.Unlock()
	var evs []wire.Event
	for len(out) > 0 {
		n := int(out[0])<<24 | int(out[1])<<16 | int(out[2])<<8 | int(out[3])
		var r wire.Response
		if err := wire.DecodeResponse(out[4:4+n], &r); err != nil {
			t.Fatal(err)
		}
		if r.Stream != c.holdStream {
			t.Fatalf("pushed on stream %d, want the hold stream %d", r.Stream, c.holdStream)
		}
		evs = append(evs, r.Events...)
		out = out[4+n:]
	}
	return evs
}

// heardOnce checks that a and b were each pushed one notice, of what, and
// that the connection without a hold stream was pushed none.
func heardOnce(t *testing.T, what string, of func(wire.Event) bool, a, b, noHolds *conn) {
	t.Helper()
	for _, tc := range []struct {
		name string
		c    *conn
		want int
	}{{"a", a, 1}, {"b", b, 1}, {"no hold stream", noHolds, 0}} {
		evs := pushed(t, tc.c)
		if len(evs) != tc.want || (tc.want == 1 && !of(evs[0])) {
			t.Errorf("%s heard %+v, want %d notice(s) of %s", tc.name, evs, tc.want, what)
		}
	}
}

// TestHoldHubTellsOnlyTheLeasesRegisteredOnAConnection: a connection hears
// the notices of the leases its acknowledged keepalives named (not gone, not
// denied), nothing else; a lease's end ends its registrations, and so does
// a long silence.
func TestHoldHubTellsOnlyTheLeasesRegisteredOnAConnection(t *testing.T) {
	s := newTestServer(t, Config{})
	a := &conn{s: s, holdStream: 3}
	b := &conn{s: s, holdStream: 5}
	noHolds := &conn{s: s}
	a.keptAlive(&wire.Request{Op: wire.OpKeepAlive, Leases: []uint64{1, 2, 3}},
		&wire.Response{Leases: []uint64{2}, Denied: []uint64{3}}) // 2 is gone, 3 another identity's
	b.keptAlive(&wire.Request{Op: wire.OpKeepAlive, Lease: 1}, &wire.Response{})
	b.keptAlive(&wire.Request{Op: wire.OpKeepAlive, Lease: 4}, &wire.Response{Code: wire.Unavailable})
	noHolds.keptAlive(&wire.Request{Op: wire.OpKeepAlive, Lease: 1}, &wire.Response{})

	forced := func(lease uint64) wire.Event {
		return wire.Event{Kind: wire.EvReleased, Cause: wire.CauseForced, Path: "/a", Token: 9, Lease: lease}
	}
	s.holds.deliver([]wire.Event{forced(1), forced(2), forced(3), forced(4),
		{Kind: wire.EvReleased, Cause: wire.CauseReleased, Path: "/a", Token: 8, Lease: 1}}) // the holder's own
	heardOnce(t, "lease 1", func(ev wire.Event) bool { return ev.Lease == 1 }, a, b, noHolds)

	s.holds.deliver([]wire.Event{{Kind: wire.EvLeaseEnd, Cause: wire.CauseExpired, Lease: 1}})
	if evs := pushed(t, a); len(evs) != 1 || evs[0].Kind != wire.EvLeaseEnd {
		t.Fatalf("a heard %+v, want its lease's end", evs)
	}
	pushed(t, b)
	s.holds.deliver([]wire.Event{forced(1)})
	if evs := append(pushed(t, a), pushed(t, b)...); len(evs) != 0 {
		t.Fatalf("notices of an ended lease: %+v", evs)
	}
	if len(a.holdLeases) != 0 || len(b.holdLeases) != 0 {
		t.Fatalf("registrations left after the lease ended: %v, %v", a.holdLeases, b.holdLeases)
	}

	a.keptAlive(&wire.Request{Op: wire.OpKeepAlive, Lease: 7}, &wire.Response{})
	s.holds.sweep(time.Now().Add(holdIdle + time.Minute))
	if s.holds.byLease[sessionKey(7)] != nil || len(a.holdLeases) != 0 {
		t.Fatalf("a registration no keepalive renewed for %v is still there", holdIdle)
	}
}

// TestHoldHubTellsSingleLockHolders: a lock acquired without a session is
// registered, by path and token, on the connections its grant and renewals
// are answered on; its end is told there once, a lock of the same lease id
// on another path is not confused with it, and its holder's release or a
// renewal that finds it gone drops the registration.
func TestHoldHubTellsSingleLockHolders(t *testing.T) {
	s := newTestServer(t, Config{})
	a := &conn{s: s, holdStream: 3}
	b := &conn{s: s, holdStream: 5}
	noHolds := &conn{s: s}
	const single = 1<<63 | 9
	grant := func(c *conn, path string) {
		c.noteSingle(&wire.Request{Op: wire.OpAcquire, Path: path}, &wire.Response{Token: 9, Lease: single})
	}
	grant(a, "/s")
	grant(noHolds, "/s")
	b.noteSingle(&wire.Request{Op: wire.OpAcquire, Path: "/s", Lease: 5}, &wire.Response{Token: 9, Lease: 5}) // a session's grant
	if len(b.holdLeases) != 0 {
		t.Fatalf("a session's grant registered %v", b.holdLeases)
	}
	b.noteSingle(&wire.Request{Op: wire.OpRenew, Path: "/s", Token: 9}, &wire.Response{}) // renewed on another connection

	ended := func(path string, cause wire.Cause) wire.Event {
		return wire.Event{Kind: wire.EvReleased, Cause: cause, Path: path, Token: 9, Lease: single}
	}
	s.holds.deliver([]wire.Event{ended("/other", wire.CauseForced), ended("/s", wire.CauseForced),
		{Kind: wire.EvLeaseEnd, Cause: wire.CauseForced, Path: "/s", Token: 9, Lease: single}})
	heardOnce(t, "/s", func(ev wire.Event) bool { return ev.Path == "/s" && ev.Cause == wire.CauseForced }, a, b, noHolds)
	if len(a.holdLeases) != 0 || len(b.holdLeases) != 0 || len(s.holds.byLease) != 0 {
		t.Fatalf("registrations left after the lock ended: %v, %v, %v", a.holdLeases, b.holdLeases, s.holds.byLease)
	}

	grant(a, "/t")
	a.noteSingle(&wire.Request{Op: wire.OpRelease, Path: "/t", Token: 9, Lease: single}, &wire.Response{})
	grant(a, "/u")
	a.noteSingle(&wire.Request{Op: wire.OpRenew, Path: "/u", Token: 9}, &wire.Response{Code: wire.NotHolder})
	if len(a.holdLeases) != 0 || len(s.holds.byLease) != 0 {
		t.Fatalf("registrations left after a release and a failed renewal: %v, %v", a.holdLeases, s.holds.byLease)
	}

	grant(a, "/v")
	s.holds.deliver([]wire.Event{ended("/v", wire.CauseExpired)})
	if evs := pushed(t, a); len(evs) != 1 || evs[0].Cause != wire.CauseExpired {
		t.Fatalf("a heard %+v, want the expiry of /v", evs)
	}
}
