package lease

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/wardenlock/warden/statemachine"
	"github.com/wardenlock/warden/wire"
)

// TestKeepAliveForLeaseEndedDuringRound: a keepalive round reads the lease alive, or
// checkpointed and then waits for the clear to pass through the log;
// meanwhile the lease's deadline (from an earlier keepalive) passes, tick
// proposes Expire, the expiry applies and the lessor forgets the lease, all
// before the round answers. The keepalive must not be acknowledged (the
// client would count a keepalive for a lease that has ended); a retry
// reports the lease gone.
func TestKeepAliveForLeaseEndedDuringRound(t *testing.T) {
	cases := []struct {
		name string
		idle time.Duration // since the lease's creation when the keepalive arrives
		want statemachine.LeaseState
		// the expiry lands after the read's lookup, or while the
		// checkpoint clear is being proposed
		duringClear bool
	}{
		{name: "alive at the read", idle: 900 * time.Millisecond, want: statemachine.LeaseAlive},
		{name: "checkpoint clear in flight", idle: 1500 * time.Millisecond, want: statemachine.LeaseCheckpointed, duringClear: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := newSMEnv(t)
			e.promote()
			e.session(7, "/a/b/c", 2000)
			created := e.clk.Now()
			e.run(tc.idle)              // checkpoint rounds run inline: idle past TTL/2 is checkpointed
			e.l.spawn = func(func()) {} // from here on the round holds cpMu on this goroutine
			expire := func() {
				e.clk.Advance(created.Add(2100 * time.Millisecond).Sub(e.clk.Now()))
				e.l.Tick() // the deadline has passed: Expire is proposed and applied at once
				if e.live(7) {
					t.Fatal("the lease did not expire: the race was not set up")
				}
			}
			var read []statemachine.LeaseState
			e.l.read = func(_ context.Context, q statemachine.LeaseCheck) (any, error) {
				v, err := e.sm.Lookup(q)
				read = slices.Clone(v.([]statemachine.LeaseState))
				if !tc.duringClear && read[0] == statemachine.LeaseAlive {
					expire()
				}
				return v, err
			}
			propose := e.l.propose
			e.l.propose = func(r *wire.Request, done func(*wire.Response)) {
				if tc.duringClear && r.Op == wire.OpCheckpoint && len(r.Remaining) == 1 && r.Remaining[0] < 0 {
					expire()
				}
				propose(r, done)
			}
			got := e.keepAlive(7)
			if len(read) != 1 || read[0] != tc.want {
				t.Fatalf("the round read %v, want [%v]", read, tc.want)
			}
			if got.Code == wire.OK && !slices.Contains(got.Leases, 7) {
				t.Fatalf("keepalive for a lease that ended during the round answered OK (not gone): %+v", got)
			}
			if got.Code != wire.OK && !got.Code.Retryable() {
				t.Fatalf("answered %v, want a retryable refusal or gone", got.Code)
			}
			if again := e.keepAlive(7); again.Code != wire.OK || !slices.Contains(again.Leases, 7) {
				t.Fatalf("the retry answered %v gone %v, want OK with the lease gone", again.Code, again.Leases)
			}
		})
	}
}

// TestKeepAliveRefusesAShortLeaseCheck: a lease check that does not answer
// for every lease acknowledges none (a missing state reads as "unknown
// here", which answers OK).
func TestKeepAliveRefusesAShortLeaseCheck(t *testing.T) {
	e := newSMEnv(t)
	e.promote()
	e.session(7, "/a/b/c", 2000)
	e.l.read = func(context.Context, statemachine.LeaseCheck) (any, error) { return []statemachine.LeaseState{}, nil }
	if got := e.keepAlive(7); got.Code == wire.OK {
		t.Fatalf("answered OK without a state for the lease: %+v", got)
	}
}

// keepAlive runs one keepalive round for id on this goroutine and returns
// its answer.
func (e *smEnv) keepAlive(id uint64) *wire.Response {
	e.t.Helper()
	var got *wire.Response
	ka := pendingKeepAlive{id: 1, ids: []uint64{id}, received: e.clk.Now(), done: func(r *wire.Response) { got = r }}
	e.l.mu.Lock()
	epoch := e.l.epoch
	e.l.mu.Unlock()
	e.l.keepAliveRound([]pendingKeepAlive{ka}, epoch)
	if got == nil {
		e.t.Fatal("the round did not answer")
	}
	return got
}
