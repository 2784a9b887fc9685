package node_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/wardenlock/warden/client"
	"github.com/wardenlock/warden/node/nodetest"
	"github.com/wardenlock/warden/wire"
)

// Every hold the service ends, for any reason, ends in a state its holder
// knows: the hold's context ends with a typed cause, IsHeld turns false, and
// the service no longer lists the hold. The holders here keep their
// sessions alive with a TTL of 600 s, so keepalives go every 200 s: a hold
// that ends within pushWithin was pushed, not found by a keepalive.

const (
	longTTL    = 600 * time.Second
	pushWithin = 30 * time.Second
)

// endedWith waits for ctx (a hold's context) to end and returns its cause.
func endedWith(t *testing.T, what string, ctx context.Context, within time.Duration) error {
	t.Helper()
	select {
	case <-ctx.Done():
		return context.Cause(ctx)
	case <-time.After(within):
		t.Fatalf("%s: the holder was not told within %v", what, within)
		return nil
	}
}

// lostBy checks that err is a *client.HoldLostError with cause.
func lostBy(t *testing.T, what string, err error, cause wire.Cause) {
	t.Helper()
	var hl *client.HoldLostError
	if !errors.As(err, &hl) || hl.Cause != cause || !errors.Is(err, client.ErrHoldLost) {
		t.Fatalf("%s: the hold's context ended with %v, want a HoldLostError with cause %s", what, err, cause)
	}
}

// notListed checks the service's view: lock info lists no holder with token.
func notListed(t *testing.T, cl *client.Client, path string, token uint64) {
	t.Helper()
	info, err := cl.LockInfo(ctxT(t, 10*time.Second), path)
	if err != nil && !errors.Is(err, client.ErrNotFound) {
		t.Fatal(err)
	}
	for _, h := range info.Holders {
		if h.Token == token {
			t.Fatalf("%s: the service still lists the ended hold %+v", path, h)
		}
	}
}

func TestRevokedHolderIsTold(t *testing.T) {
	c := nodetest.Start(t, nodetest.Options{Nodes: 3, Shards: 2})
	admin := newClient(t, c)
	for _, tc := range []struct {
		name   string
		opts   []client.LockOption
		revoke func(ctx context.Context, path string, token uint64) error
	}{
		{"forced now", nil, func(ctx context.Context, path string, token uint64) error {
			return admin.ForceRevokeLock(ctx, path, token, 0)
		}},
		{"at the deadline", []client.LockOption{client.WithRevocable()}, func(ctx context.Context, path string, token uint64) error {
			return admin.RevokeLock(ctx, path, token, time.Second)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := ctxT(t, 60*time.Second)
			holder := newClient(t, c)
			s := session(t, holder, longTTL)
			path := "/revoked/" + map[string]string{"forced now": "now", "at the deadline": "deadline"}[tc.name] + "/lock"
			m := client.NewMutex(s, path, tc.opts...)
			if err := m.Lock(ctx); err != nil {
				t.Fatal(err)
			}
			token := m.Token()
			if err := tc.revoke(ctx, path, token); err != nil {
				t.Fatal(err)
			}
			lostBy(t, tc.name, endedWith(t, tc.name, m.Context(), pushWithin), wire.CauseForced)
			if m.IsHeld() {
				t.Error("IsHeld after the revocation")
			}
			if err := m.Unlock(ctx); !errors.Is(err, client.ErrNotHolder) || !errors.Is(err, client.ErrHoldLost) {
				t.Errorf("Unlock after the revocation: %v, want ErrNotHolder and ErrHoldLost", err)
			}
			notListed(t, admin, path, token)
			// The Mutex can be taken again (its gate was given back).
			if err := m.Lock(ctx); err != nil || m.Token() <= token {
				t.Fatalf("Lock again: %v (token %d after %d)", err, m.Token(), token)
			}
		})
	}
}

func TestHandedOverLeaderIsTold(t *testing.T) {
	c := nodetest.Start(t, nodetest.Options{Nodes: 3, Shards: 2})
	ctx := ctxT(t, 60*time.Second)
	admin := newClient(t, c)
	const path = "/elections/s2"
	a := client.NewElection(session(t, newClient(t, c), longTTL), path, client.WithOwner("a"))
	if err := a.Campaign(ctx, []byte("va")); err != nil {
		t.Fatal(err)
	}
	token := a.Token()
	b := client.NewElection(session(t, newClient(t, c), longTTL), path, client.WithOwner("b"))
	elected := make(chan error, 1)
	go func() { elected <- b.Campaign(ctx, []byte("vb")) }()
	waitQueued(t, admin, path)
	// An operator hands the leadership over, with a's token, from elsewhere.
	if _, err := admin.Do(ctx, &wire.Request{Op: wire.OpHandOver, Path: path, Token: token, Target: "b"}); err != nil {
		t.Fatal(err)
	}
	if err := <-elected; err != nil {
		t.Fatal(err)
	}
	lostBy(t, "hand-over", endedWith(t, "hand-over", a.Context(), pushWithin), wire.CauseHandover)
	if a.IsLeader() {
		t.Error("a still thinks it leads")
	}
	if li, err := admin.Leader(ctx, path); err != nil || li.Owner != "b" {
		t.Fatalf("leader after hand-over: %+v, %v", li, err)
	}
	notListed(t, admin, path, token)

	// An operator makes b resign with its token: b is told too.
	if _, err := admin.Do(ctx, &wire.Request{Op: wire.OpResign, Path: path, Token: b.Token()}); err != nil {
		t.Fatal(err)
	}
	lostBy(t, "admin resign", endedWith(t, "admin resign", b.Context(), pushWithin), wire.CauseResigned)
	if b.IsLeader() {
		t.Error("b still thinks it leads after an admin's resign")
	}
}

func TestSessionLossEndsEveryHold(t *testing.T) {
	c := nodetest.Start(t, nodetest.Options{Nodes: 3, Shards: 2})
	ctx := ctxT(t, 60*time.Second)
	admin := newClient(t, c)
	holder := newClient(t, c)
	s := session(t, holder, longTTL)
	m := client.NewMutex(s, "/lost/m/lock")
	rw := client.NewRWMutex(s, "/lost/rw/lock")
	if err := m.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := rw.RLock(ctx); err != nil {
		t.Fatal(err)
	}
	p, err := client.NewSemaphore(s, "/lost/sem/pool", 2).Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	all, err := client.LockAll(ctx, s, []string{"/lost/all/a", "/lost/all/b"})
	if err != nil {
		t.Fatal(err)
	}
	e := client.NewElection(s, "/lost/elect")
	if err := e.Campaign(ctx, nil); err != nil {
		t.Fatal(err)
	}
	// The operator ends the session's lease.
	if _, err := admin.Do(ctx, &wire.Request{Op: wire.OpRevoke, Lease: s.Lease()}); err != nil {
		t.Fatal(err)
	}
	for _, h := range []struct {
		what string
		ctx  context.Context
	}{{"mutex", m.Context()}, {"read lock", rw.RContext()}, {"permit", p.Context()},
		{"multi-lock", all.Context()}, {"election", e.Context()}} {
		if err := endedWith(t, h.what, h.ctx, pushWithin); !errors.Is(err, client.ErrSessionExpired) {
			t.Errorf("%s: ended with %v, want ErrSessionExpired", h.what, err)
		}
	}
	if m.IsHeld() || p.IsHeld() || all.IsHeld() || e.IsLeader() || s.State() != client.Lost {
		t.Errorf("after the lease's end: mutex %v permit %v multi %v leader %v session %v",
			m.IsHeld(), p.IsHeld(), all.IsHeld(), e.IsLeader(), s.State())
	}
	for _, path := range []string{"/lost/m/lock", "/lost/rw/lock", "/lost/sem/pool", "/lost/all/a", "/lost/elect"} {
		info, err := admin.LockInfo(ctx, path)
		if err == nil && len(info.Holders) > 0 {
			t.Errorf("%s still held: %+v", path, info.Holders)
		}
	}
}

func TestRevokedPermitAndMultiLockAreTold(t *testing.T) {
	c := nodetest.Start(t, nodetest.Options{Nodes: 3, Shards: 2})
	ctx := ctxT(t, 60*time.Second)
	admin := newClient(t, c)
	s := session(t, newClient(t, c), longTTL)
	p, err := client.NewSemaphore(s, "/revsem/pool", 3).Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := admin.ForceRevokeLock(ctx, "/revsem/pool", p.Token(), 0); err != nil {
		t.Fatal(err)
	}
	lostBy(t, "permit", endedWith(t, "permit", p.Context(), pushWithin), wire.CauseForced)
	if p.IsHeld() {
		t.Error("permit IsHeld after its revocation")
	}
	notListed(t, admin, "/revsem/pool", p.Token())

	all, err := client.LockAll(ctx, s, []string{"/revall/x/a", "/revall/y/b"})
	if err != nil {
		t.Fatal(err)
	}
	tok := all.Tokens()["/revall/y/b"]
	if err := admin.ForceRevokeLock(ctx, "/revall/y/b", tok, 0); err != nil {
		t.Fatal(err)
	}
	err = endedWith(t, "multi-lock", all.Context(), pushWithin)
	lostBy(t, "multi-lock", err, wire.CauseForced)
	var hl *client.HoldLostError
	if errors.As(err, &hl); hl.Path != "/revall/y/b" || hl.Token != tok {
		t.Errorf("the multi-lock's cause names %s token %d, want /revall/y/b token %d", hl.Path, hl.Token, tok)
	}
	if all.IsHeld() {
		t.Error("multi-lock IsHeld with one of its paths revoked")
	}
	if err := all.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	notListed(t, admin, "/revall/x/a", all.Tokens()["/revall/x/a"])
}

// TestStandaloneRouterPushesNotices: a client behind a standalone router
// (no replica on it) hears of a revocation pushed through the router's
// forwarded subscription, long before its next keepalive; also one made
// while the node that subscription went to was down (the router follows
// the shard through another node, from the revision it had reached).
func TestStandaloneRouterPushesNotices(t *testing.T) {
	c := nodetest.Start(t, nodetest.Options{Nodes: 3, Shards: 2})
	addr := startStandaloneRouter(t, c)
	ctx := ctxT(t, 60*time.Second)
	holder, err := client.New(ctx, []string{addr}, client.WithoutDirectRouting(),
		client.WithRequestTimeout(15*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Close()
	s := session(t, holder, longTTL)
	admin := newClient(t, c)
	for i, path := range []string{"/viarouter/a/lock", "/viarouter/b/lock", "/viarouter/c/lock"} {
		m := client.NewMutex(s, path)
		if err := m.Lock(ctx); err != nil {
			t.Fatal(err)
		}
		if err := admin.ForceRevokeLock(ctx, path, m.Token(), 0); err != nil {
			t.Fatal(err)
		}
		what := fmt.Sprintf("through the router, lock %d", i)
		lostBy(t, what, endedWith(t, what, m.Context(), pushWithin), wire.CauseForced)
	}

	const path = "/viarouter/d/lock"
	m := client.NewMutex(s, path)
	if err := m.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	c.StopNode(c.LeaderOf(shardOf(t, c, path))) // the node the router follows the shard through
	if err := admin.ForceRevokeLock(ctx, path, m.Token(), 0); err != nil {
		t.Fatal(err)
	}
	lostBy(t, "while the followed node was down", endedWith(t, "while the followed node was down", m.Context(), pushWithin),
		wire.CauseForced)
}

// TestKeepaliveAnswersCarryEndedHolds: a keepalive answer lists the holds
// of its leases the service ended without the holder (for a holder whose
// pushed notice was lost), and only of its own leases.
func TestKeepaliveAnswersCarryEndedHolds(t *testing.T) {
	c := nodetest.Start(t, nodetest.Options{Nodes: 3, Shards: 2})
	ctx := ctxT(t, 60*time.Second)
	rc := dialRaw(t, c.AllEndpoints()[0]) // opens no hold stream: nothing is pushed to it
	const lease, other = 0x5eed, 0x0bed
	rc.send(&wire.Request{ID: 1, Op: wire.OpAcquire, Path: "/kanotice/ns/lock", Lease: lease, TTL: 60_000, Owner: "o",
		Client: 5, Seq: 1})
	grant := rc.recv()
	if grant.Code != wire.OK {
		t.Fatalf("acquire: %+v", grant)
	}
	rc.send(&wire.Request{ID: 2, Op: wire.OpAcquire, Path: "/kanotice/other/lock", Lease: other, TTL: 60_000, Owner: "o",
		Client: 5, Seq: 2})
	if r := rc.recv(); r.Code != wire.OK {
		t.Fatalf("acquire: %+v", r)
	}
	admin := newClient(t, c)
	if err := admin.ForceRevokeLock(ctx, "/kanotice/ns/lock", grant.Token, 0); err != nil {
		t.Fatal(err)
	}
	if err := admin.ForceRevokeLock(ctx, "/kanotice/other/lock", 0, 0); err != nil {
		t.Fatal(err)
	}
	// (Retried only while a shard answers Unavailable: a leader change.)
	var r *wire.Response
	nodetest.WaitFor(t, 10*time.Second, "an acknowledged keepalive", func() error {
		rc.send(&wire.Request{ID: 3, Op: wire.OpKeepAlive, Leases: []uint64{lease}, TTL: 60_000})
		r = rc.recv()
		return r.AsError()
	})
	if len(r.Events) != 1 || r.Events[0].Kind != wire.EvReleased || r.Events[0].Cause != wire.CauseForced ||
		r.Events[0].Token != grant.Token || r.Events[0].Lease != lease || r.Events[0].Path != "/kanotice/ns/lock" {
		t.Fatalf("keepalive answer's notices: %+v, want the forced release of token %d only", r.Events, grant.Token)
	}
}

// TestSingleLockHolderIsTold: a lock acquired without a session (its own
// lease, renewed by hand) is told of its end like a session's hold: pushed
// on the connection its grant was answered on, long before its TTL, also
// behind a standalone router; its lease's expiry ends it on the client's
// clock first; its holder's own release is no notice. A renewal answered on
// another connection registers it there too.
func TestSingleLockHolderIsTold(t *testing.T) {
	c := nodetest.Start(t, nodetest.Options{Nodes: 3, Shards: 2})
	admin := newClient(t, c)
	direct := newClient(t, c)
	ctx := ctxT(t, 120*time.Second)
	viaRouter, err := client.New(ctx, []string{startStandaloneRouter(t, c)}, client.WithoutDirectRouting(),
		client.WithRequestTimeout(15*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer viaRouter.Close()

	for _, tc := range []struct {
		name   string
		holder *client.Client
		path   string
		end    func(l *client.Lock) error
		cause  wire.Cause
	}{
		{"revoked now", direct, "/single/revoked/lock", func(l *client.Lock) error {
			return admin.ForceRevokeLock(ctx, l.Path(), l.Token(), 0)
		}, wire.CauseForced},
		{"released by another client", direct, "/single/released/lock", func(l *client.Lock) error {
			rc := dialRaw(t, c.AllEndpoints()[0]) // a release by token alone, as an operator's tool sends it
			rc.send(&wire.Request{ID: 1, Op: wire.OpRelease, Path: l.Path(), Token: l.Token(), Client: 77, Seq: 1})
			return rc.recv().AsError()
		}, wire.CauseReleased},
		{"revoked behind a router", viaRouter, "/single/router/lock", func(l *client.Lock) error {
			return admin.ForceRevokeLock(ctx, l.Path(), l.Token(), 0)
		}, wire.CauseForced},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l, err := tc.holder.Acquire(ctx, tc.path, longTTL)
			if err != nil {
				t.Fatal(err)
			}
			if !l.IsHeld() {
				t.Fatal("a fresh grant is not held")
			}
			if err := tc.end(l); err != nil {
				t.Fatal(err)
			}
			lostBy(t, tc.name, endedWith(t, tc.name, l.Context(), pushWithin), tc.cause)
			if l.IsHeld() {
				t.Fatal("IsHeld after the hold was lost")
			}
			if err := l.Renew(ctx, longTTL); !errors.Is(err, client.ErrHoldLost) {
				t.Fatalf("Renew after the hold was lost: %v, want the HoldLostError", err)
			}
			notListed(t, admin, tc.path, l.Token())
		})
	}

	t.Run("renewed, then expired", func(t *testing.T) {
		l, err := direct.Acquire(ctx, "/single/expired/lock", 2*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if err := l.Renew(ctx, 2*time.Second); err != nil {
			t.Fatal(err)
		}
		err = endedWith(t, "expiry", l.Context(), 10*time.Second)
		lostBy(t, "expiry", err, wire.CauseExpired)
		nodetest.WaitFor(t, 10*time.Second, "the service to end the expired lease", func() error {
			info, err := admin.LockInfo(ctx, l.Path())
			if err == nil && len(info.Holders) > 0 {
				return fmt.Errorf("still held: %+v", info.Holders)
			}
			return nil
		})
	})

	t.Run("released by its holder", func(t *testing.T) {
		l, err := direct.Acquire(ctx, "/single/own/lock", longTTL)
		if err != nil {
			t.Fatal(err)
		}
		if err := l.Release(ctx); err != nil {
			t.Fatal(err)
		}
		if cause := context.Cause(l.Context()); !errors.Is(cause, client.ErrReleased) {
			t.Fatalf("context after Release ended with %v, want ErrReleased", cause)
		}
	})
}
