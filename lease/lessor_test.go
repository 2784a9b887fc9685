package lease

import (
	"io"
	"log/slog"
	"testing"
	"time"

	sm "github.com/lni/dragonboat/v4/statemachine"

	"github.com/wardenlock/warden/statemachine"
	"github.com/wardenlock/warden/wire"
)

// newTestLessor builds a lessor whose expiry proposals are captured instead
// of reaching Raft, driven by a manual clock.
func newTestLessor(clk *ManualClock) (*Lessor, *[]*wire.Request) {
	l := New(Config{Shard: 2, Clock: clk, Log: slog.New(slog.NewTextHandler(io.Discard, nil)), Stop: make(chan struct{}),
		ReadTimeout: 5 * time.Second, CheckpointInterval: 250 * time.Millisecond, LeaseAllowance: 150 * time.Millisecond})
	var proposed []*wire.Request
	l.propose = func(r *wire.Request, done func(*wire.Response)) { proposed = append(proposed, r) }
	l.spawn = func(func()) {} // no checkpoint rounds here (lessor_checkpoint_test.go)
	l.leader, l.term = true, 5
	return l, &proposed
}

func TestLessorExpiresOnlyAfterTTL(t *testing.T) {
	clk := NewManualClock(time.Unix(1000, 0))
	l, proposed := newTestLessor(clk)
	l.OnEvents([]wire.Event{{Kind: wire.EvLease, Lease: 7, TTL: 2000, Rev: 3}})
	clk.Advance(1999 * time.Millisecond)
	l.Tick()
	if len(*proposed) != 0 {
		t.Fatal("expired before its TTL")
	}
	clk.Advance(time.Millisecond)
	l.Tick()
	if len(*proposed) != 1 || (*proposed)[0].Op != wire.OpExpire || (*proposed)[0].Lease != 7 || (*proposed)[0].Rev != 3 ||
		(*proposed)[0].Term != 5 {
		t.Fatalf("proposed %+v, want Expire{7, rev 3}", *proposed)
	}
	l.Tick()
	if len(*proposed) != 1 {
		t.Fatal("an expiring lease was proposed twice")
	}
}

func TestLessorRenewalPushesDeadline(t *testing.T) {
	clk := NewManualClock(time.Unix(1000, 0))
	l, proposed := newTestLessor(clk)
	l.OnEvents([]wire.Event{{Kind: wire.EvLease, Lease: 7, TTL: 2000, Rev: 3}})
	clk.Advance(1500 * time.Millisecond)
	l.OnEvents([]wire.Event{{Kind: wire.EvRenewed, Lease: 7, TTL: 2000, Rev: 9}})
	clk.Advance(1500 * time.Millisecond)
	l.Tick()
	if len(*proposed) != 0 {
		t.Fatal("expired 1.5s after a renewal with a 2s TTL")
	}
	clk.Advance(500 * time.Millisecond)
	l.Tick()
	if len(*proposed) != 1 || (*proposed)[0].Rev != 9 {
		t.Fatalf("want an expiry carrying the renewal's revision, got %+v", *proposed)
	}
}

func TestLessorFollowerNeverExpires(t *testing.T) {
	clk := NewManualClock(time.Unix(1000, 0))
	l, proposed := newTestLessor(clk)
	l.leader = false
	l.OnEvents([]wire.Event{{Kind: wire.EvLease, Lease: 7, TTL: 1000}})
	clk.Advance(time.Hour)
	l.Tick()
	if len(*proposed) != 0 {
		t.Fatal("a follower proposed an expiry")
	}
}

func TestLessorForgetsEndedLease(t *testing.T) {
	clk := NewManualClock(time.Unix(1000, 0))
	l, proposed := newTestLessor(clk)
	l.OnEvents([]wire.Event{{Kind: wire.EvLease, Lease: 7, TTL: 1000}})
	l.OnEvents([]wire.Event{{Kind: wire.EvLeaseEnd, Lease: 7}})
	clk.Advance(time.Hour)
	l.Tick()
	if len(*proposed) != 0 {
		t.Fatal("expired a lease that had already ended")
	}
}

func TestLessorRefreshNeverShortensOrRevivesExpiring(t *testing.T) {
	clk := NewManualClock(time.Unix(1000, 0))
	l, proposed := newTestLessor(clk)
	l.OnEvents([]wire.Event{{Kind: wire.EvLease, Lease: 7, TTL: 2000}})
	received := clk.Now()
	clk.Advance(1000 * time.Millisecond)
	l.mu.Lock()
	gone := l.refresh(7, statemachine.LeaseAlive, received.Add(-5*time.Second))
	l.mu.Unlock()
	if gone {
		t.Fatal("alive lease reported gone")
	}
	clk.Advance(1000 * time.Millisecond)
	l.Tick()
	if len(*proposed) != 1 {
		t.Fatal("an old keepalive must not move the deadline back or forward past TTL")
	}
	l.mu.Lock()
	gone = l.refresh(7, statemachine.LeaseAlive, clk.Now())
	l.mu.Unlock()
	if !gone {
		t.Fatal("a keepalive for a lease being expired must be refused")
	}
}

// TestKeepAliveOfAForeignLease: a keepalive for a lease bound to another
// identity does not move its deadline and lists it as Denied; the owner's
// keepalive in the same round does.
func TestKeepAliveOfAForeignLease(t *testing.T) {
	clk := NewManualClock(time.Unix(1000, 0))
	l, proposed := newTestLessor(clk)
	l.OnEvents([]wire.Event{{Kind: wire.EvLease, Lease: 7, TTL: 2000, Rev: 3}})
	clk.Advance(1500 * time.Millisecond)
	var got []*wire.Response
	done := func(r *wire.Response) { got = append(got, r) }
	batch := []pendingKeepAlive{
		{id: 1, ids: []uint64{7}, identity: "erin", received: clk.Now(), done: done},
		{id: 2, ids: []uint64{7}, identity: "alice", received: clk.Now(), done: done},
	}
	if q := leaseCheck(batch); len(q.Identities) != 2 || q.Identities[0] != "erin" || q.Identities[1] != "alice" {
		t.Fatalf("lease check %+v does not carry the senders' identities", q)
	}
	l.answerKeepAlives(batch[:1], []statemachine.LeaseState{statemachine.LeaseForeign}, l.epoch)
	if len(got) != 1 || got[0].Code != wire.OK || len(got[0].Denied) != 1 || got[0].Denied[0] != 7 || len(got[0].Leases) != 0 {
		t.Fatalf("foreign keepalive answered %+v, want OK with Denied [7]", got)
	}
	clk.Advance(500 * time.Millisecond)
	l.Tick()
	if len(*proposed) != 1 || (*proposed)[0].Lease != 7 {
		t.Fatalf("the foreign keepalive refreshed the lease: proposed %+v at its original deadline", *proposed)
	}
	if q := leaseCheck(batch[1:]); q.Identities[0] != "alice" {
		t.Fatal("owner's identity lost")
	}
	if q := leaseCheck([]pendingKeepAlive{{ids: []uint64{7}}}); q.Identities != nil {
		t.Fatal("a check without identities must not ask about owners")
	}
}
func smEntry(index uint64, cmd []byte) sm.Entry { return sm.Entry{Index: index, Cmd: cmd} }
