package client

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/wardenlock/warden/wire"
)

// holdConn waits for a client connection whose hold stream is open.
func (s *fakeServer) holdConn(t *testing.T) *fakeConn {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		s.mu.Lock()
		for _, fc := range s.conns {
			if fc.holds != 0 {
				s.mu.Unlock()
				return fc
			}
		}
		s.mu.Unlock()
		if time.Now().After(deadline) {
			t.Fatal("the client opened no hold stream")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// pushHold sends a hold notice on the connection's hold stream.
func (fc *fakeConn) pushHold(t *testing.T, ev wire.Event) {
	t.Helper()
	fc.srv.mu.Lock()
	stream := fc.holds
	fc.srv.mu.Unlock()
	fc.reply(&wire.Response{Stream: stream, Events: []wire.Event{ev}})
}

func lockedMutex(t *testing.T, ls *lockServer, s *Session, path string, token uint64) *Mutex {
	t.Helper()
	ls.grantNow = func(req *wire.Request) *wire.Response {
		return &wire.Response{Token: token, Lease: req.Lease, Count: 1}
	}
	m := NewMutex(s, path)
	if err := m.Lock(testContext(t)); err != nil {
		t.Fatal(err)
	}
	return m
}

func waitEnded(t *testing.T, ctx context.Context) error {
	t.Helper()
	select {
	case <-ctx.Done():
		return context.Cause(ctx)
	case <-time.After(5 * time.Second):
		t.Fatal("the hold's context did not end")
		return nil
	}
}

func TestPushedNoticeEndsTheHold(t *testing.T) {
	ls, s := newLockTest(t)
	m := lockedMutex(t, ls, s, "/locks/a", 7)
	ctx := m.Context()
	// Notices for another token, path or lease change nothing (the service
	// sends no notice of the holder's own releases: router tests).
	fc := ls.holdConn(t)
	fc.pushHold(t, wire.Event{Kind: wire.EvReleased, Cause: wire.CauseForced, Path: "/locks/a", Token: 8, Lease: s.Lease()})
	fc.pushHold(t, wire.Event{Kind: wire.EvReleased, Cause: wire.CauseForced, Path: "/locks/b", Token: 7, Lease: s.Lease()})
	fc.pushHold(t, wire.Event{Kind: wire.EvReleased, Cause: wire.CauseForced, Path: "/locks/a", Token: 7, Lease: s.Lease() + 1})
	fc.pushHold(t, wire.Event{Kind: wire.EvReleased, Cause: wire.CauseForced, Path: "/locks/a", Token: 7, Lease: s.Lease()})
	err := waitEnded(t, ctx)
	var hl *HoldLostError
	if !errors.As(err, &hl) || hl.Cause != wire.CauseForced || hl.Token != 7 || hl.Path != "/locks/a" {
		t.Fatalf("cause %v, want the forced revocation of token 7", err)
	}
	if m.IsHeld() || m.Token() != 0 {
		t.Error("still held after the notice")
	}
	if err := m.Unlock(testContext(t)); !errors.Is(err, ErrNotHolder) || !errors.Is(err, ErrHoldLost) {
		t.Errorf("Unlock of a lost hold: %v", err)
	}
	if n := len(ls.requests(wire.OpRelease)); n != 0 {
		t.Errorf("%d releases sent for a hold the service had ended", n)
	}
	// The gate was given back: the Mutex can be locked again.
	ls.grantNow = func(req *wire.Request) *wire.Response { return &wire.Response{Token: 9, Lease: req.Lease} }
	if err := m.TryLock(testContext(t)); err != nil || m.Token() != 9 {
		t.Fatalf("TryLock after the loss: %v, token %d", err, m.Token())
	}
}

// TestNoticeBeforeTheGrantIsKept: a notice can overtake the grant it ends
// (pushed while the grant's answer is on its way): the hold is told as
// soon as it is registered.
func TestNoticeBeforeTheGrantIsKept(t *testing.T) {
	ls, s := newLockTest(t)
	ls.holdConn(t).pushHold(t, wire.Event{Kind: wire.EvReleased, Cause: wire.CauseHandover, Client: 3, Path: "/el/x",
		Token: 11, Lease: s.Lease()})
	time.Sleep(50 * time.Millisecond) // the notice is read before the grant
	ls.grantNow = func(req *wire.Request) *wire.Response { return &wire.Response{Token: 11, Lease: req.Lease} }
	e := NewElection(s, "/el/x")
	if err := e.Campaign(testContext(t), nil); err != nil {
		t.Fatal(err)
	}
	var hl *HoldLostError
	if err := waitEnded(t, e.Context()); !errors.As(err, &hl) || hl.Cause != wire.CauseHandover {
		t.Fatalf("leadership ended with %v, want the hand-over", err)
	}
	if e.IsLeader() {
		t.Error("still leader after the hand-over")
	}
}

func TestKeepaliveAnswerEndsTheHoldAndTheSession(t *testing.T) {
	var notice atomic.Pointer[wire.Event]
	ls := newLockServer(t)
	ls.fakeServer.handle = func(fc *fakeConn, req *wire.Request) {
		if req.Op == wire.OpKeepAlive {
			resp := wire.Response{}
			if ev := notice.Load(); ev != nil {
				resp.Events = []wire.Event{*ev}
			}
			fc.answer(req, resp)
			return
		}
		ls.handle(fc, req)
	}
	clk := newFakeClock()
	c := newTestClient(t, []string{ls.addr()}, withClock(clk))
	s, err := c.NewSession(testContext(t), WithTTL(3*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	p := func() *Permit {
		ls.grantNow = func(req *wire.Request) *wire.Response { return &wire.Response{Token: 21, Lease: req.Lease} }
		p, err := NewSemaphore(s, "/sem/p", 2).Acquire(testContext(t))
		if err != nil {
			t.Fatal(err)
		}
		return p
	}()
	notice.Store(&wire.Event{Kind: wire.EvReleased, Cause: wire.CauseForced, Path: "/sem/p", Token: 21, Lease: s.Lease()})
	clk.Advance(time.Second) // the next keepalive
	var hl *HoldLostError
	if err := waitEnded(t, p.Context()); !errors.As(err, &hl) || hl.Cause != wire.CauseForced {
		t.Fatalf("permit ended with %v, want the revocation its keepalive answer reported", err)
	}
	if s.State() == Lost {
		t.Fatal("the session was lost: a hold's notice must not end it")
	}
	notice.Store(&wire.Event{Kind: wire.EvLeaseEnd, Cause: wire.CauseRevoked, Lease: s.Lease()})
	clk.Advance(time.Second)
	if err := waitEnded(t, s.Context()); !errors.Is(err, ErrSessionExpired) {
		t.Fatalf("session ended with %v, want ErrSessionExpired", err)
	}
}

// TestUnansweredWithdrawalGoesOnInTheBackground: a wait withdrawn while the
// service cannot answer (no quorum) returns ErrAmbiguous to the caller; the
// client keeps asking, and gives back the grant the answer reports.
func TestUnansweredWithdrawalGoesOnInTheBackground(t *testing.T) {
	ls, s := newLockTest(t)
	var unavailable atomic.Int32
	unavailable.Store(1)
	ls.onCancel = func(fc *fakeConn, req *wire.Request, p parkedReq) {
		if unavailable.Load() == 1 {
			fc.answer(req, wire.Response{Code: wire.Unavailable, Msg: "no quorum"})
			return
		}
		fc.answer(req, wire.Response{Token: 55}) // it had been granted
	}
	m := NewMutex(s, "/locks/bg")
	ctx, cancel := context.WithCancel(testContext(t))
	errc := make(chan error, 1)
	go func() { errc <- m.Lock(ctx) }()
	ls.nextAcquire(t)
	cancel()
	err := <-errc
	if !errors.Is(err, ErrAmbiguous) || !errors.Is(err, context.Canceled) {
		t.Fatalf("Lock withdrawn without an answer: %v, want ErrAmbiguous and context.Canceled", err)
	}
	if m.IsHeld() {
		t.Fatal("held after a failed Lock")
	}
	unavailable.Store(0)
	deadline := time.Now().Add(5 * time.Second)
	for len(ls.requests(wire.OpRelease)) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the grant the withdrawal turned up was never given back")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if rel := ls.requests(wire.OpRelease)[0]; rel.Token != 55 || rel.Path != "/locks/bg" || rel.Lease != s.Lease() {
		t.Fatalf("release %+v, want token 55 of /locks/bg", rel)
	}
}

type recordedLoss struct{ lost []error }

func (r *recordedLoss) holdLost(_ uint64, cause error) { r.lost = append(r.lost, cause) }

// TestHeldSetTellsTheHoldOfTheRightPath: tokens are unique per shard only,
// so two holds of one session can share one on different paths; a notice
// finds the one of its path, and a notice that finds none is kept (once)
// for a hold registered later.
func TestHeldSetTellsTheHoldOfTheRightPath(t *testing.T) {
	var hs heldSet
	a, b, c := &recordedLoss{}, &recordedLoss{}, &recordedLoss{}
	hs.add("/s1/a", 7, a)
	hs.add("/s2/b", 7, b)
	if h := hs.take(&HoldLostError{Path: "/s2/b", Token: 7}); h != b {
		t.Fatalf("the notice of /s2/b found %v", h)
	}
	if h := hs.take(&HoldLostError{Path: "/s2/b", Token: 7}); h != nil {
		t.Fatalf("a second notice of /s2/b found %v", h)
	}
	hs.remove("/s1/a", 7, a)
	if len(hs.m) != 0 {
		t.Fatalf("entries left: %v", hs.m)
	}
	hs.take(&HoldLostError{Path: "/s3/c", Token: 9, Cause: wire.CauseForced})
	hs.take(&HoldLostError{Path: "/s3/c", Token: 9, Cause: wire.CauseForced}) // repeated by a keepalive answer
	// Pending: the repeated /s2/b notice, and /s3/c's once.
	if len(hs.pending) != 2 {
		t.Fatalf("%d pending notices, want 2", len(hs.pending))
	}
	hs.add("/s3/c", 9, c)
	if len(c.lost) != 1 || len(hs.m) != 0 || len(hs.pending) != 1 {
		t.Fatalf("a hold registered after its notice: told %v, registry %v, pending %v", c.lost, hs.m, hs.pending)
	}
}
