package client

import (
	"context"
	"errors"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/wardenlock/warden/wire"
)

// keepAliveScript answers keepalives with whatever mode holds.
type keepAliveScript struct {
	mode atomic.Int32 // 0 ok, 1 unavailable, 2 lease gone, 3 no answer
}

func (k *keepAliveScript) handle(fc *fakeConn, req *wire.Request) {
	if req.Op != wire.OpKeepAlive {
		fc.answer(req, wire.Response{})
		return
	}
	switch k.mode.Load() {
	case 3:
		return // the keepalive hangs
	case 1:
		fc.answer(req, wire.Response{Code: wire.Unavailable})
	case 2: // every lease named is gone (keepalives arrive batched in Leases)
		gone := append([]uint64(nil), req.Leases...)
		if req.Lease != 0 {
			gone = append(gone, req.Lease)
		}
		fc.answer(req, wire.Response{Leases: gone})
	default:
		fc.answer(req, wire.Response{})
	}
}

// nextState waits for the next state change.
func nextState(t *testing.T, s *Session) SessionState {
	t.Helper()
	select {
	case st, ok := <-s.States():
		if !ok {
			t.Fatal("States closed")
		}
		return st
	case <-time.After(5 * time.Second):
		t.Fatalf("no state change; state is %s", s.State())
	}
	return 0
}

func newScriptedSession(t *testing.T, ttl time.Duration) (*Session, *keepAliveScript, *fakeClock, *fakeServer) {
	t.Helper()
	script := &keepAliveScript{}
	srv := newFakeServer(t, script.handle)
	clk := newFakeClock()
	c := newTestClient(t, []string{srv.addr()}, withClock(clk))
	s, err := c.NewSession(testContext(t), WithTTL(ttl))
	if err != nil {
		t.Fatal(err)
	}
	if st := nextState(t, s); st != Connected {
		t.Fatalf("first state = %s, want connected", st)
	}
	eventually(t, "the keepalive scheduler's timer", func() bool { return clk.pending() == 1 })
	return s, script, clk, srv
}

func TestSessionSuspendedThenLostLocally(t *testing.T) {
	const ttl = 9 * time.Second
	s, script, clk, srv := newScriptedSession(t, ttl)
	kas := srv.requests(wire.OpKeepAlive)
	if len(kas) != 1 || kas[0].Lease != s.Lease() || kas[0].TTL != ttl.Milliseconds() || s.Lease()>>63 != 0 || s.Lease() == 0 {
		t.Fatalf("first keepalive = %+v, lease %x: want the session's lease and TTL in ms", kas, s.Lease())
	}

	script.mode.Store(1) // the service becomes unavailable
	clk.Advance(ttl / 3)
	if st := nextState(t, s); st != Suspended {
		t.Fatalf("after a failed keepalive: %s, want suspended", st)
	}
	select {
	case <-s.Done():
		t.Fatal("session ended while only suspended")
	default:
	}

	clk.Advance(ttl) // past lastAckedSend + TTL without hearing the server
	if st := nextState(t, s); st != Lost {
		t.Fatalf("after the TTL: %s, want lost", st)
	}
	<-s.Done()
	if !errors.Is(s.Err(), ErrSessionExpired) {
		t.Errorf("Err = %v, want ErrSessionExpired", s.Err())
	}
	if _, ok := <-s.States(); ok {
		t.Error("States not closed after Lost")
	}
	if err := NewMutex(s, "/locks/a").Lock(testContext(t)); !errors.Is(err, ErrSessionExpired) {
		t.Errorf("Lock on a lost session: %v, want ErrSessionExpired", err)
	}
}

func TestSessionRecoversFromSuspended(t *testing.T) {
	const ttl = 9 * time.Second
	s, script, clk, _ := newScriptedSession(t, ttl)
	script.mode.Store(1)
	clk.Advance(ttl / 3)
	if st := nextState(t, s); st != Suspended {
		t.Fatalf("state %s, want suspended", st)
	}
	script.mode.Store(0)
	clk.Advance(ttl / 3) // the retry is due well within TTL/3
	if st := nextState(t, s); st != Connected {
		t.Fatalf("state %s, want connected again", st)
	}
	// The local deadline now counts from the send time of the retry, which
	// is the current fake time: a full TTL is left.
	if left := s.untilDeadline(); left != ttl {
		t.Errorf("time left = %s, want the full TTL %s counted from the acknowledged retry", left, ttl)
	}
}

func TestSessionLostWhenServiceReportsLeaseGone(t *testing.T) {
	const ttl = 6 * time.Second
	s, script, clk, _ := newScriptedSession(t, ttl)
	script.mode.Store(2)
	clk.Advance(ttl / 3)
	if st := nextState(t, s); st != Lost {
		t.Fatalf("state %s, want lost", st)
	}
	if !errors.Is(context.Cause(s.Context()), ErrSessionExpired) {
		t.Errorf("cause = %v, want ErrSessionExpired", context.Cause(s.Context()))
	}
}

func TestSessionCloseRevokes(t *testing.T) {
	s, _, _, srv := newScriptedSession(t, 6*time.Second)
	if err := s.Close(testContext(t)); err != nil {
		t.Fatal(err)
	}
	if st := nextState(t, s); st != Closed {
		t.Errorf("state %s, want closed", st)
	}
	rev := srv.requests(wire.OpRevoke)
	if len(rev) != 1 || rev[0].Lease != s.Lease() || rev[0].Seq == 0 {
		t.Errorf("revoke = %+v, want one with the lease and a seq", rev)
	}
	if !errors.Is(s.Err(), ErrSessionClosed) || !errors.Is(s.Err(), ErrSessionExpired) {
		t.Errorf("Err = %v, want ErrSessionClosed (and ErrSessionExpired)", s.Err())
	}
	if err := s.Close(testContext(t)); err != nil {
		t.Errorf("second Close: %v", err)
	}
}

func TestStatesNeverBlocksAndKeepsLatest(t *testing.T) {
	s := &Session{states: make(chan SessionState, stateBuffer), c: &Client{cfg: defaultConfig()}}
	for i := range 3 * stateBuffer {
		s.setState([]SessionState{Connected, Suspended}[i%2])
	}
	var got []SessionState
	for len(s.states) > 0 {
		got = append(got, <-s.states)
	}
	if len(got) != stateBuffer || got[len(got)-1] != s.State() {
		t.Errorf("buffered states %v, want %d of them ending with the current %s", got, stateBuffer, s.State())
	}
	if slices.Contains(got, 0) {
		t.Errorf("zero state in %v", got)
	}
}

// TestSessionNotLiveOnceItsDeadlinePassed: the moment the local deadline
// passes, Err and IsHeld say so, before the keepalive loop has had a chance
// to run (a starved or paused client must not trust its locks).
func TestSessionNotLiveOnceItsDeadlinePassed(t *testing.T) {
	const ttl = 9 * time.Second
	s, script, clk, _ := newScriptedSession(t, ttl)
	m := NewMutex(s, "/locks/a")
	m.h.mu.Lock()
	m.h.count = 1 // as if granted: only the session's liveness is under test
	m.h.mu.Unlock()
	script.mode.Store(1)
	clk.Jump(ttl - time.Millisecond)
	if err := s.Err(); err != nil || !m.IsHeld() {
		t.Fatalf("1 ms before the deadline: Err = %v, IsHeld = %v; want live and held", err, m.IsHeld())
	}
	clk.Jump(time.Millisecond) // no timer fires: the loop has not run
	if err := s.Err(); !errors.Is(err, ErrSessionExpired) {
		t.Fatalf("at the deadline: Err = %v, want ErrSessionExpired", err)
	}
	if m.IsHeld() {
		t.Fatal("IsHeld after the session's deadline passed")
	}
}

// A keepalive that is not answered within TTL/3 suspends the session; one
// that never is lets the local deadline end it, without waiting for the
// request to time out.
func TestSessionSuspendedWhileKeepAliveHangs(t *testing.T) {
	const ttl = 9 * time.Second
	s, script, clk, _ := newScriptedSession(t, ttl)
	script.mode.Store(3)
	clk.Advance(ttl / 3) // the keepalive goes out and hangs
	eventually(t, "the overdue timer", func() bool { return clk.pending() == 1 })
	clk.Advance(ttl / 3)
	if st := nextState(t, s); st != Suspended {
		t.Fatalf("with the keepalive overdue: %s, want suspended", st)
	}
	clk.Advance(ttl / 3)
	if st := nextState(t, s); st != Lost {
		t.Fatalf("at the deadline: %s, want lost", st)
	}
}
