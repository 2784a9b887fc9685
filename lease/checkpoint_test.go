package lease

import (
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/wardenlock/warden/statemachine"
	"github.com/wardenlock/warden/wire"
)

// smEnv drives a lessor against a real state machine: its proposals are
// applied at once (as one-op entries stamped with the manual clock), and a
// leader change is simulated the way load does it: a term marker, then the
// lease table read back from the state machine.
type smEnv struct {
	t     *testing.T
	clk   *ManualClock
	sm    *statemachine.StateMachine
	l     *Lessor
	index uint64
	term  uint64
	log   []*wire.Request // everything the lessor proposed
}

func newSMEnv(t *testing.T) *smEnv {
	e := &smEnv{t: t, clk: NewManualClock(time.Unix(1000, 0)), sm: statemachine.New(statemachine.DefaultConfig())}
	e.l = New(Config{Shard: 2, Clock: e.clk, Log: slog.New(slog.NewTextHandler(io.Discard, nil)), Stop: make(chan struct{}),
		ReadTimeout: 5 * time.Second, CheckpointInterval: 250 * time.Millisecond, LeaseAllowance: 150 * time.Millisecond})
	e.l.propose = func(r *wire.Request, done func(*wire.Response)) {
		e.log = append(e.log, r)
		done(e.apply(r))
	}
	e.l.spawn = func(f func()) { f() }
	e.sm.SetObserver(observerFunc(func(evs []wire.Event) { e.l.OnEvents(evs) }))
	e.apply(&wire.Request{Op: wire.OpSetRanges, Gen: 1, Ranges: []wire.Range{{Shard: 0}}})
	return e
}

type observerFunc func([]wire.Event)

func (f observerFunc) Applied(_ uint64, evs []wire.Event) { f(evs) }

func (e *smEnv) apply(r *wire.Request) *wire.Response {
	e.t.Helper()
	cmd, err := statemachine.EncodeCommand(nil, e.clk.Now().UnixMilli(), []*wire.Request{r})
	if err != nil {
		e.t.Fatal(err)
	}
	e.index++
	res, err := e.sm.Update(smEntry(e.index, cmd))
	if err != nil {
		e.t.Fatal(err)
	}
	out, err := statemachine.DecodeResults(res.Data)
	if err != nil || len(out) != 1 {
		e.t.Fatalf("results %v %v", out, err)
	}
	return &out[0]
}

// promote makes the lessor a new leader in a new term and loads leases.
func (e *smEnv) promote() {
	e.term++
	e.l.setLeaderForTest(e.term)
	if r := e.apply(&wire.Request{Op: wire.OpNoop, Term: e.term}); r.Code != wire.OK {
		e.t.Fatalf("term marker: %v", r.Code)
	}
	v, _ := e.sm.Lookup(statemachine.LeasesQuery{})
	e.l.mu.Lock()
	e.l.install(v.([]statemachine.LeaseInfo))
	e.l.mu.Unlock()
}

// run ticks the lessor every 20 ms for d.
func (e *smEnv) run(d time.Duration) {
	for end := e.clk.Now().Add(d); e.clk.Now().Before(end); {
		e.clk.Advance(20 * time.Millisecond)
		e.l.Tick()
	}
}

func (e *smEnv) live(id uint64) bool {
	v, _ := e.sm.Lookup(statemachine.LeaseCheck{IDs: []uint64{id}})
	st := v.([]statemachine.LeaseState)[0]
	return st == statemachine.LeaseAlive || st == statemachine.LeaseCheckpointed
}

func (e *smEnv) session(id uint64, path string, ttl int64) {
	r := e.apply(&wire.Request{Op: wire.OpAcquire, Path: path, Lease: id, TTL: ttl})
	if r.Code != wire.OK {
		e.t.Fatalf("acquire %s: %v %s", path, r.Code, r.Msg)
	}
}

// setLeaderForTest is setLeader without the background load.
func (l *Lessor) setLeaderForTest(term uint64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.epoch++
	l.leader, l.term = true, term
	l.leases, l.heap = map[uint64]*lease{}, nil
	l.loading = &leaseTracking{added: map[uint64]leaseSeen{}, ended: map[uint64]struct{}{}}
}

// TestDeadLeaseExpiresUnderLeaderChurn: a dead holder's lease ends under
// leadership churn, at the lessor level:
// leadership changes every 700 ms, well under the 2 s TTL, and the holder
// never sends a keepalive. Each leader checkpoints what it knows, so the
// lease still ends within a bound; it never ends before its TTL.
func TestDeadLeaseExpiresUnderLeaderChurn(t *testing.T) {
	const ttl = 2 * time.Second
	period := 700 * time.Millisecond
	e := newSMEnv(t)
	e.promote()
	created := e.clk.Now()
	e.session(7, "/a/b/c", ttl.Milliseconds())
	var ended time.Duration
	for i := 0; i < 40 && ended == 0; i++ {
		for j := 0; j < int(period/(20*time.Millisecond)) && ended == 0; j++ {
			e.run(20 * time.Millisecond)
			if !e.live(7) {
				ended = e.clk.Now().Sub(created)
			}
		}
		if ended == 0 {
			e.promote()
		}
	}
	if ended == 0 {
		t.Fatalf("the dead holder's lease survived %d leader changes", 40)
	}
	if ended < ttl {
		t.Fatalf("the lease ended %v after its creation, before its TTL of %v", ended, ttl)
	}
	// Each leadership of 700 ms gives away at most one checkpoint interval,
	// the allowance and a tick, so the lease loses at least ~280 ms of its
	// remaining time per leader: ttl / 280 ms leaders at most.
	if bound := ttl + 8*period; ended > bound {
		t.Fatalf("the lease ended %v after its creation, beyond the bound %v", ended, bound)
	}
	t.Logf("ended %v after creation under a leader change every %v", ended, period)
}

// Without checkpoints the same churn keeps the lease alive forever (what
// the test above guards against): a control that the test can fail.
func TestLeaderChurnWithoutCheckpointsKeepsDeadLease(t *testing.T) {
	e := newSMEnv(t)
	e.l.spawn = func(func()) {}
	e.promote()
	e.session(7, "/a/b/c", 2000)
	for range 20 {
		e.run(700 * time.Millisecond)
		e.promote()
	}
	if !e.live(7) {
		t.Fatal("the lease ended without checkpoints: the churn test above proves nothing")
	}
}

// TestCheckpointNeverShortensAcknowledgedKeepalive: a lease kept alive through
// a leader must, under every later leader, last at least TTL after the last
// acknowledged keepalive, checkpoints or not.
func TestCheckpointNeverShortensAcknowledgedKeepalive(t *testing.T) {
	e := newSMEnv(t)
	e.promote()
	e.session(7, "/a/b/c", 2000)
	e.run(1500 * time.Millisecond) // checkpointed: idle past TTL/2
	v, _ := e.sm.Lookup(statemachine.LeaseCheck{IDs: []uint64{7}})
	if st := v.([]statemachine.LeaseState)[0]; st != statemachine.LeaseCheckpointed {
		t.Fatalf("lease idle for 1.5 s of a 2 s TTL is %v, want checkpointed", st)
	}
	// A keepalive arrives: the round clears the checkpoint, then refreshes.
	ack := e.clk.Now()
	e.l.cpMu.Lock()
	if !e.l.clearCheckpoints([]uint64{7}) {
		t.Fatal("clear failed")
	}
	e.l.mu.Lock()
	e.l.refresh(7, statemachine.LeaseAlive, ack)
	e.l.mu.Unlock()
	e.l.cpMu.Unlock()
	// The leader dies at once; the next ones keep changing.
	for range 10 {
		e.promote()
		e.run(100 * time.Millisecond)
		if !e.live(7) && e.clk.Now().Sub(ack) < 2*time.Second {
			t.Fatalf("lease ended %v after an acknowledged keepalive (TTL 2 s)", e.clk.Now().Sub(ack))
		}
	}
	for e.live(7) {
		e.run(20 * time.Millisecond)
	}
	if d := e.clk.Now().Sub(ack); d < 2*time.Second {
		t.Fatalf("lease ended %v after its last acknowledged keepalive", d)
	}
}

// TestLiveSessionsAreNotCheckpointedInSteadyLeadership: keepalives every
// TTL/3 under one leader never make the lessor write a checkpoint.
func TestLiveSessionsAreNotCheckpointedInSteadyLeadership(t *testing.T) {
	e := newSMEnv(t)
	e.promote()
	e.session(7, "/a/b/c", 3000)
	for range 20 {
		e.run(time.Second)
		e.l.mu.Lock()
		e.l.refresh(7, statemachine.LeaseAlive, e.clk.Now())
		e.l.mu.Unlock()
	}
	for _, r := range e.log {
		if r.Op == wire.OpCheckpoint {
			t.Fatalf("a live lease was checkpointed: %+v", r)
		}
	}
	if !e.live(7) {
		t.Fatal("a kept-alive lease expired")
	}
}
