package client

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/wardenlock/warden/wire"
)

// lockServer parks every acquire and lets the test decide the answers.
type lockServer struct {
	*fakeServer
	acquired chan parkedReq // each acquire as it arrives
	onCancel func(fc *fakeConn, req *wire.Request, parked parkedReq)
	grantNow func(req *wire.Request) *wire.Response // non-nil answer: reply at once

	mu     sync.Mutex
	parked map[uint64]parkedReq // by seq
	token  atomic.Uint64
}

type parkedReq struct {
	fc  *fakeConn
	req *wire.Request
}

func newLockServer(t *testing.T) *lockServer {
	ls := &lockServer{acquired: make(chan parkedReq, 16), parked: map[uint64]parkedReq{}}
	ls.token.Store(100)
	ls.fakeServer = newFakeServer(t, ls.handle)
	return ls
}

func (ls *lockServer) handle(fc *fakeConn, req *wire.Request) {
	switch req.Op {
	case wire.OpAcquire, wire.OpCampaign:
		if ls.grantNow != nil {
			if resp := ls.grantNow(req); resp != nil {
				fc.answer(req, *resp)
				return
			}
		}
		p := parkedReq{fc, req}
		ls.mu.Lock()
		ls.parked[req.Seq] = p
		ls.mu.Unlock()
		ls.acquired <- p
	case wire.OpCancel:
		ls.mu.Lock()
		p := ls.parked[req.Seq]
		ls.mu.Unlock()
		ls.onCancel(fc, req, p)
	default:
		fc.answer(req, wire.Response{})
	}
}

func (ls *lockServer) nextAcquire(t *testing.T) parkedReq {
	t.Helper()
	select {
	case p := <-ls.acquired:
		return p
	case <-time.After(5 * time.Second):
		t.Fatal("no acquire arrived")
	}
	return parkedReq{}
}

func newLockTest(t *testing.T) (*lockServer, *Session) {
	ls := newLockServer(t)
	c := newTestClient(t, []string{ls.addr()}, WithPoolSize(3))
	s, err := c.NewSession(testContext(t), WithTTL(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	return ls, s
}

func TestLockCancelledWithdrawsWaiter(t *testing.T) {
	ls, s := newLockTest(t)
	ls.onCancel = func(fc *fakeConn, req *wire.Request, p parkedReq) {
		fc.answer(req, wire.Response{Code: wire.Cancelled})
		p.fc.answer(p.req, wire.Response{Code: wire.Cancelled})
	}
	m := NewMutex(s, "/locks/a")
	ctx, cancel := context.WithCancel(context.Background()) // no deadline: wait forever
	defer cancel()
	errc := make(chan error, 1)
	go func() { errc <- m.Lock(ctx) }()

	acq := ls.nextAcquire(t)
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Fatalf("Lock: %v, want context.Canceled", err)
	}
	r := acq.req
	if r.Path != "/locks/a" || r.Mode != wire.Exclusive || r.Lease != s.Lease() || r.TTL != 5000 ||
		r.Wait != wire.WaitForever || r.Owner == "" || r.Client != s.c.ID() || r.Seq == 0 {
		t.Errorf("acquire = %+v: want path, exclusive, session lease, TTL 5000, wait forever, owner, client, seq", r)
	}
	cancels := ls.requests(wire.OpCancel)
	if len(cancels) != 1 || cancels[0].Client != r.Client || cancels[0].Seq != r.Seq || cancels[0].Path != r.Path {
		t.Fatalf("cancels = %+v, want one naming client %d seq %d path %s (any connection reaches it by path)",
			cancels, r.Client, r.Seq, r.Path)
	}
	if m.IsHeld() || m.Token() != 0 || len(ls.requests(wire.OpRelease)) != 0 {
		t.Errorf("held after a withdrawn wait (token %d)", m.Token())
	}
}

func TestLockCancelledAfterGrantGivesItBack(t *testing.T) {
	ls, s := newLockTest(t)
	ls.onCancel = func(fc *fakeConn, req *wire.Request, p parkedReq) {
		// The grant won the race: the acquire gets it, the cancel reports it.
		p.fc.answer(p.req, wire.Response{Token: 42})
		fc.answer(req, wire.Response{Token: 42})
	}
	m := NewMutex(s, "/locks/a")
	ctx, cancel := context.WithCancel(testContext(t))
	errc := make(chan error, 1)
	go func() { errc <- m.Lock(ctx) }()
	ls.nextAcquire(t)
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Fatalf("Lock: %v, want context.Canceled", err)
	}
	rel := ls.requests(wire.OpRelease)
	if len(rel) != 1 || rel[0].Token != 42 || rel[0].Path != "/locks/a" {
		t.Fatalf("releases = %+v, want one of token 42", rel)
	}
	if m.IsHeld() {
		t.Error("IsHeld after giving the late grant back")
	}
}

func TestLockGrantedLaterThenUnlockByToken(t *testing.T) {
	ls, s := newLockTest(t)
	m := NewMutex(s, "/locks/a")
	errc := make(chan error, 1)
	ctx, cancel := context.WithTimeout(testContext(t), 4*time.Second)
	defer cancel()
	go func() { errc <- m.Lock(ctx) }()
	acq := ls.nextAcquire(t)
	if acq.req.Wait <= 0 || acq.req.Wait > 4000 {
		t.Errorf("Wait = %d ms, want the time left before the deadline", acq.req.Wait)
	}
	acq.fc.answer(acq.req, wire.Response{Token: 9, Lease: s.Lease(), Count: 1})
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	if !m.IsHeld() || m.Token() != 9 || m.Context().Err() != nil {
		t.Fatalf("after grant: held %v token %d ctx %v", m.IsHeld(), m.Token(), m.Context().Err())
	}
	// Not reentrant: a second TryLock on the same Mutex fails locally.
	if err := m.TryLock(ctx); !errors.Is(err, ErrConflict) {
		t.Errorf("TryLock while held: %v, want ErrConflict", err)
	}
	if err := m.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	rel := ls.requests(wire.OpRelease)
	if len(rel) != 1 || rel[0].Token != 9 || rel[0].Seq == 0 {
		t.Fatalf("releases = %+v, want one by token 9 with a seq", rel)
	}
	if m.IsHeld() || m.Context().Err() == nil {
		t.Error("still held after Unlock")
	}
	if err := m.Unlock(ctx); !errors.Is(err, ErrNotHolder) {
		t.Errorf("second Unlock: %v, want ErrNotHolder", err)
	}
	if n := len(ls.requests(wire.OpAcquire)); n != 1 {
		t.Errorf("server saw %d acquires, want 1", n)
	}
}

func TestTryLockConflict(t *testing.T) {
	ls, s := newLockTest(t)
	ls.grantNow = func(req *wire.Request) *wire.Response {
		return &wire.Response{Code: wire.Conflict, Msg: "held by someone"}
	}
	err := NewMutex(s, "/locks/a").TryLock(testContext(t))
	if !errors.Is(err, ErrConflict) {
		t.Fatalf("TryLock: %v, want ErrConflict", err)
	}
	if acq := ls.requests(wire.OpAcquire); len(acq) != 1 || acq[0].Wait != wire.WaitNone {
		t.Errorf("acquires = %+v, want one with WaitNone", acq)
	}
}

func TestLockAbortsWhenSessionLost(t *testing.T) {
	script := &keepAliveScript{}
	ls := newLockServer(t)
	ls.onCancel = func(fc *fakeConn, req *wire.Request, p parkedReq) {
		p.fc.answer(p.req, wire.Response{Code: wire.SessionExpired})
		fc.answer(req, wire.Response{})
	}
	inner := ls.fakeServer.handle
	ls.fakeServer.handle = func(fc *fakeConn, req *wire.Request) {
		if req.Op == wire.OpKeepAlive {
			script.handle(fc, req)
			return
		}
		inner(fc, req)
	}
	clk := newFakeClock()
	c := newTestClient(t, []string{ls.addr()}, withClock(clk))
	s, err := c.NewSession(testContext(t), WithTTL(3*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, "the keepalive scheduler's timer", func() bool { return clk.pending() == 1 })
	errc := make(chan error, 1)
	go func() { errc <- NewMutex(s, "/locks/a").Lock(testContext(t)) }()
	ls.nextAcquire(t)
	script.mode.Store(2)
	clk.Advance(time.Second)
	if err := <-errc; !errors.Is(err, ErrSessionExpired) {
		t.Fatalf("Lock: %v, want ErrSessionExpired", err)
	}
	eventually(t, "the waiter to be withdrawn", func() bool { return len(ls.requests(wire.OpCancel)) == 1 })
}

func TestRWMutexReadersShareOneGrant(t *testing.T) {
	ls, s := newLockTest(t)
	ls.grantNow = func(req *wire.Request) *wire.Response {
		return &wire.Response{Token: ls.token.Add(1)}
	}
	rw := NewRWMutex(s, "/locks/r")
	ctx := testContext(t)
	for range 3 {
		if err := rw.RLock(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if err := rw.Lock(ctx); err != nil { // the fake grants anything; the owners must differ
		t.Fatal(err)
	}
	acq := ls.requests(wire.OpAcquire)
	if len(acq) != 2 || acq[0].Mode != wire.Shared || acq[1].Mode != wire.Exclusive || acq[0].Owner == acq[1].Owner {
		t.Fatalf("acquires = %+v, want one shared and one exclusive with distinct owners", acq)
	}
	for range 3 {
		if err := rw.RUnlock(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if err := rw.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	rel := ls.requests(wire.OpRelease)
	if len(rel) != 2 || rel[0].Token != 101 || rel[1].Token != 102 {
		t.Errorf("releases = %+v, want the shared grant (101) once, then the exclusive (102)", rel)
	}
}

func TestAcquireSingleLockLease(t *testing.T) {
	ls := newLockServer(t)
	ls.grantNow = func(req *wire.Request) *wire.Response {
		return &wire.Response{Token: 77, Lease: 1<<63 | 5}
	}
	c := newTestClient(t, []string{ls.addr()})
	ctx := testContext(t)
	l, err := c.Acquire(ctx, "/jobs/x", 30*time.Second, WithShared(), WithTry())
	if err != nil {
		t.Fatal(err)
	}
	if l.Token() != 77 || l.Lease() != 1<<63|5 {
		t.Errorf("lock = token %d lease %x", l.Token(), l.Lease())
	}
	if err := l.Renew(ctx, time.Minute); err != nil {
		t.Fatal(err)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	acq, ren, rel := ls.requests(wire.OpAcquire), ls.requests(wire.OpRenew), ls.requests(wire.OpRelease)
	if len(acq) != 1 || acq[0].Lease != 0 || acq[0].TTL != 30000 || acq[0].Mode != wire.Shared || acq[0].Wait != wire.WaitNone {
		t.Errorf("acquire = %+v: want lease 0, TTL 30000, shared, try", acq)
	}
	if len(ren) != 1 || ren[0].Token != 77 || ren[0].TTL != 60000 {
		t.Errorf("renew = %+v", ren)
	}
	if len(rel) != 1 || rel[0].Token != 77 {
		t.Errorf("release = %+v", rel)
	}
}

// A session-bound wait outlives its connection: after a drop the client
// re-attaches with the same sequence number (on a new connection), so the
// shard answers with the waiter it already has. A wait without a session is
// withdrawn by the server with its connection, so it is sent with a new one.
func TestParkedAcquireResentAfterDrop(t *testing.T) {
	cases := []struct {
		name    string
		session bool
	}{
		{"session wait re-attaches with the same seq", true},
		{"session-less wait is re-sent with a new seq", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ls, s := newLockTest(t)
			errc := make(chan error, 1)
			var token func() uint64
			if tc.session {
				m := NewMutex(s, "/locks/a")
				token = m.Token
				go func() { errc <- m.Lock(testContext(t)) }()
			} else {
				var l *Lock
				done := make(chan struct{})
				token = func() uint64 { <-done; return l.Token() }
				go func() {
					var err error
					l, err = s.Client().Acquire(testContext(t), "/locks/a", 10*time.Second)
					close(done)
					errc <- err
				}()
			}
			first := ls.nextAcquire(t)
			first.fc.drop()
			second := ls.nextAcquire(t)
			sameSeq := second.req.Seq == first.req.Seq
			if second.fc == first.fc || sameSeq != tc.session || second.req.Client != first.req.Client ||
				second.req.Path != first.req.Path || second.req.Owner != first.req.Owner {
				t.Fatalf("re-sent acquire %+v (first %+v): want a new connection, same client, path and owner, same seq=%v",
					second.req, first.req, tc.session)
			}
			second.fc.answer(second.req, wire.Response{Token: 11})
			if err := <-errc; err != nil {
				t.Fatal(err)
			}
			if token() != 11 {
				t.Errorf("token %d, want 11", token())
			}
		})
	}
}

// The hold's context is made only when asked for; one asked for only after
// the lock ended must still be ended, with the reason.
func TestMutexContextAskedAfterUnlock(t *testing.T) {
	ls, s := newLockTest(t)
	m := NewMutex(s, "/locks/a")
	if err := m.Context().Err(); err == nil {
		t.Fatal("context of a never-locked Mutex is live")
	}
	ctx := testContext(t)
	errc := make(chan error, 1)
	go func() { errc <- m.Lock(ctx) }()
	acq := ls.nextAcquire(t)
	acq.fc.answer(acq.req, wire.Response{Token: 9, Lease: s.Lease(), Count: 1})
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	if err := m.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if c := m.Context(); c.Err() == nil || !errors.Is(context.Cause(c), ErrReleased) {
		t.Fatalf("context after Unlock: err %v cause %v, want ended by ErrReleased", c.Err(), context.Cause(c))
	}
}
